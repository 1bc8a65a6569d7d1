"""The issuer's RFC 8414 metadata with ``poppy_domains`` (PAP §3.2) or ``protected_resources`` (1.0).

Each tenant has its own issuer (PAP-3.2-08), often with a path such as
``https://auth.provider.example/shop-a``; its metadata lives at the RFC 8414 §3.1 URL
(:func:`metadata_url`). The document lists exactly what an agent needs: the endpoints of
the enabled sign-in types, ``private_key_jwt`` client authentication, DPoP algorithms with
ES256, PKCE S256 and the ``iss`` authorization response parameter for Direct Sign-In.

The profiles a tenant serves shape it (ADR 0004 §1): ``poppy_domains`` and the jwt-bearer
Session grant while 0.2 is served; ``protected_resources`` (``https://{domain}`` of every
domain, no path, port or trailing slash [S §2]) and ``refresh_token`` while 1.0 is served.
Serving only 0.2 gives exactly the document 0.2 always had.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import msgspec

from frontdoor_protocol.domain_name import is_domain_name, normalize_domain
from frontdoor_protocol.https_url import https_url_problem, is_loopback_http_url
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM, is_asymmetric_algorithm
from frontdoor_protocol.profile import PROFILE_0_2, SessionCredential, profile_for
from frontdoor_protocol.protected_resource_metadata import domain_resource
from frontdoor_protocol.scopes import BUILT_IN_SCOPES, is_scope_token

__all__ = [
    "CLIENT_AUTH_METHOD",
    "METADATA_WELL_KNOWN",
    "AuthorizationServerMetadata",
    "GrantType",
    "build_metadata",
    "metadata_url",
]

METADATA_WELL_KNOWN: Final = "/.well-known/oauth-authorization-server"
"""The RFC 8414 §3 well-known path."""

CLIENT_AUTH_METHOD: Final = "private_key_jwt"
"""How agents authenticate: an assertion signed with a key from their ``jwks_uri`` (PAP §4.1)."""


class GrantType(StrEnum):
    """The grant types a company's token endpoint can accept."""

    JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    """Start or renew a Session with a Session assertion (RFC 7523; PAP §4.2). Always on."""
    REFRESH_TOKEN = "refresh_token"
    """Use an Account Token (PAP §4.8)."""
    AUTHORIZATION_CODE = "authorization_code"
    """Direct Sign-In (PAP §4.5)."""
    DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
    """Device Sign-In (RFC 8628; PAP §4.6)."""


class AuthorizationServerMetadata(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """RFC 8414 §2 metadata as a PAP company publishes it (PAP-3.2-01)."""

    issuer: str
    poppy_domains: tuple[str, ...] | None = None
    protected_resources: tuple[str, ...] | None = None
    jwks_uri: str
    token_endpoint: str
    revocation_endpoint: str
    grant_types_supported: tuple[str, ...]
    response_types_supported: tuple[str, ...]
    token_endpoint_auth_methods_supported: tuple[str, ...]
    token_endpoint_auth_signing_alg_values_supported: tuple[str, ...]
    revocation_endpoint_auth_methods_supported: tuple[str, ...]
    revocation_endpoint_auth_signing_alg_values_supported: tuple[str, ...]
    dpop_signing_alg_values_supported: tuple[str, ...]
    scopes_supported: tuple[str, ...]
    authorization_endpoint: str | None = None
    device_authorization_endpoint: str | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    authorization_response_iss_parameter_supported: bool | None = None


def metadata_url(issuer: str, *, allow_http_loopback: bool = False) -> str:
    """Where an issuer's metadata is published (RFC 8414 §3.1).

    The well-known path goes between the host and the issuer's path, and a terminating
    ``/`` of the path is dropped: ``https://h/slug`` has its metadata at
    ``https://h/.well-known/oauth-authorization-server/slug`` (PAP-3.2-07, PAP-3.2-08).

    Args:
        issuer: An issuer identifier: an https URL without query or fragment (RFC 8414 §2).

    Returns:
        The metadata URL.

    Raises:
        ValueError: If ``issuer`` is not a valid issuer identifier.
    """
    plain_ok = allow_http_loopback and is_loopback_http_url(issuer)
    if (https_url_problem(issuer) is not None and not plain_ok) or "?" in issuer or "#" in issuer:
        raise ValueError("an issuer is an https URL without query or fragment")
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, METADATA_WELL_KNOWN + path, "", ""))


def _require_url(value: str, name: str, *, allow_http_loopback: bool = False) -> None:
    if allow_http_loopback and is_loopback_http_url(value):
        return
    if https_url_problem(value) is not None:
        raise ValueError(f"{name} must be an https URL (PAP-3-05)")


def _algorithms(values: Sequence[str], name: str) -> tuple[str, ...]:
    algs = tuple(dict.fromkeys(values))
    if not algs or not all(is_asymmetric_algorithm(alg) for alg in algs):
        raise ValueError(f"{name} must list asymmetric JWS algorithms only (PAP-4.3-20)")
    return algs


def build_metadata(
    *,
    issuer: str,
    domains: Iterable[str],
    jwks_uri: str,
    token_endpoint: str,
    revocation_endpoint: str,
    scopes: Iterable[str] = tuple(BUILT_IN_SCOPES),
    grant_types: Iterable[GrantType] = (GrantType.JWT_BEARER, GrantType.REFRESH_TOKEN),
    authorization_endpoint: str | None = None,
    device_authorization_endpoint: str | None = None,
    assertion_signing_algs: Sequence[str] = ("ES256", "RS256"),
    dpop_signing_algs: Sequence[str] = (REQUIRED_DPOP_ALGORITHM,),
    allow_http_loopback: bool = False,
    served: Collection[str] = (PROFILE_0_2.protocol_version,),
    resources: Iterable[str] = (),
) -> dict[str, Any]:
    """The metadata document of one tenant's issuer.

    Args:
        issuer: The issuer identifier, published unchanged as ``auth.issuer`` too.
        domains: Every domain whose ``poppy.json`` names this issuer (PAP-3.2-01).
        jwks_uri: Where the issuer's public signing keys are.
        token_endpoint: The token endpoint.
        revocation_endpoint: The RFC 7009 endpoint for Account Tokens (PAP §4.9).
        scopes: Every scope any sign-in type grants, built-in and custom.
        grant_types: The enabled grants; ``jwt-bearer`` must be one while 0.2 is served
            (Sessions, PAP §4.2) and is left out when only 1.0 is.
        authorization_endpoint: Required exactly when ``authorization_code`` is enabled.
        device_authorization_endpoint: Required exactly when ``device_code`` is enabled.
        assertion_signing_algs: Algorithms accepted for client assertions.
        dpop_signing_algs: Algorithms accepted for DPoP proofs; must include ES256.
        allow_http_loopback: Development only: accept ``http://`` URLs on loopback hosts.
        served: The ``protocol_version`` of every profile the tenant serves.
        resources: Further protected resources listed under 1.0 beside the domain
            origins (API and MCP URLs the tenant issues access tokens for).

    Returns:
        The metadata as plain JSON values.

    Raises:
        ValueError: If a URL is not https, a domain or scope is malformed, an algorithm is
            not asymmetric, ES256 is missing from ``dpop_signing_algs``, or the endpoints
            do not match the grant types, or ``served`` is empty or names an unknown profile.
    """
    profiles = [profile_for(version) for version in served]
    if not profiles:
        raise ValueError("a tenant serves at least one profile")
    serves_session_tokens = any(p.session_credential is SessionCredential.SESSION_TOKEN for p in profiles)
    serves_delegated = any(p.session_credential is SessionCredential.DELEGATED_SESSION_JWT for p in profiles)
    loopback = allow_http_loopback
    metadata_url(issuer, allow_http_loopback=loopback)
    for name, url in (("jwks_uri", jwks_uri), ("token_endpoint", token_endpoint)):
        _require_url(url, name, allow_http_loopback=loopback)
    _require_url(revocation_endpoint, "revocation_endpoint", allow_http_loopback=loopback)
    grants = tuple(dict.fromkeys(GrantType(grant) for grant in grant_types))
    if serves_session_tokens and GrantType.JWT_BEARER not in grants:
        raise ValueError("the jwt-bearer grant starts Sessions and cannot be disabled (PAP §4.2)")
    if not serves_session_tokens:
        # 1.0 has no Session grant: agents sign their own Session JWTs [S §2].
        grants = tuple(grant for grant in grants if grant is not GrantType.JWT_BEARER)
    if serves_delegated and GrantType.REFRESH_TOKEN not in grants:
        grants = (*grants, GrantType.REFRESH_TOKEN)  # always listed in 1.0 [S §2]
    direct = _optional_endpoint(
        authorization_endpoint, GrantType.AUTHORIZATION_CODE in grants, "authorization_endpoint", loopback
    )
    device = _optional_endpoint(
        device_authorization_endpoint, GrantType.DEVICE_CODE in grants, "device_authorization_endpoint", loopback
    )
    poppy_domains = tuple(dict.fromkeys(normalize_domain(domain) for domain in _domains(domains)))
    protected_resources = None
    if serves_delegated:
        extra = tuple(resources)
        for url in extra:
            _require_url(url, "resources", allow_http_loopback=loopback)
        protected_resources = tuple(dict.fromkeys((*(domain_resource(d) for d in poppy_domains), *extra)))
    # An issuer with no verified domain yet still publishes metadata (its admins and the
    # publish check read it); agents refuse it because their domain is not listed.
    scope_list = tuple(dict.fromkeys(scopes))
    if not all(is_scope_token(scope) for scope in scope_list):
        raise ValueError("every scope must be a scope-token (RFC 6749 §3.3)")
    dpop_algs = _algorithms(dpop_signing_algs, "dpop_signing_algs")
    if REQUIRED_DPOP_ALGORITHM not in dpop_algs:
        raise ValueError("dpop_signing_algs must include ES256 (PAP-3.2-10)")
    assertion_algs = _algorithms(assertion_signing_algs, "assertion_signing_algs")
    metadata = AuthorizationServerMetadata(
        issuer=issuer,
        poppy_domains=poppy_domains if serves_session_tokens else None,
        protected_resources=protected_resources,
        jwks_uri=jwks_uri,
        token_endpoint=token_endpoint,
        revocation_endpoint=revocation_endpoint,
        grant_types_supported=tuple(grant.value for grant in grants),
        response_types_supported=("code",) if direct else (),
        token_endpoint_auth_methods_supported=(CLIENT_AUTH_METHOD,),
        token_endpoint_auth_signing_alg_values_supported=assertion_algs,
        revocation_endpoint_auth_methods_supported=(CLIENT_AUTH_METHOD,),
        revocation_endpoint_auth_signing_alg_values_supported=assertion_algs,
        dpop_signing_alg_values_supported=dpop_algs,
        scopes_supported=scope_list,
        authorization_endpoint=direct,
        device_authorization_endpoint=device,
        code_challenge_methods_supported=("S256",) if direct else None,
        authorization_response_iss_parameter_supported=True if direct else None,
    )
    built: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(metadata))
    return built


def _optional_endpoint(url: str | None, enabled: bool, name: str, loopback: bool = False) -> str | None:
    if enabled != (url is not None):
        raise ValueError(f"{name} is given exactly when its grant type is enabled")
    if url is not None:
        _require_url(url, name, allow_http_loopback=loopback)
    return url


def _domains(domains: Iterable[str]) -> Iterable[str]:
    for domain in domains:
        if not is_domain_name(domain):
            raise ValueError("poppy_domains entries must be DNS names (PAP-3.2-01)")
        yield domain
