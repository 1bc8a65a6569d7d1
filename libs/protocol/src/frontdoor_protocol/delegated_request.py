"""A PAP 1.0 request to a company resource: one ``Poppy-Session`` and an optional access token.

Parsing (:func:`parse_delegated_request`, no keys needed):

1. No token in the URL (RFC 6750 §2.3): ``invalid_request``.
2. Exactly one ``Poppy-Session`` header, parsed (``invalid_session``; see
   :mod:`frontdoor_protocol.delegated_session`).
3. At most one credential in ``Authorization`` [S §5; ADR 0004 §4]: two headers, or one
   value holding two credentials (``Bearer a, DPoP b``, as a proxy joins repeated
   headers), are ``invalid_request`` (RFC 6750 §3.1). Commas and scheme names inside
   quoted auth-params do not start a credential. The scheme ``Bearer`` or ``DPoP`` is
   compared case-insensitively; its token must be a token68 (``invalid_token``). Any other
   scheme is not an access token: the request is signed out.

Verification (:func:`verify_delegated_request`), at most three ES256 signatures plus one
for a DPoP proof; with the caller's
:class:`~frontdoor_protocol.delegation.DelegationCache` (``delegations``), a delegation that
verified before costs no parse and no signature check (its ``kid``, ``iss`` and times are
checked again):

4. The Session JWT and its delegation (``invalid_session``; ``ath`` binds the token).
5. The access token (RFC 9068, ``invalid_token``); its ``client_id`` is the Session's
   ``iss`` (same client [S §3]); a DPoP-bound token needs the ``DPoP`` scheme and an unbound
   one ``Bearer`` (RFC 9449 §7.1).
6. For a DPoP-bound token, exactly one ``DPoP`` proof for this method and URL, by the
   bound key, with the token's ``ath`` (``invalid_dpop_proof``).

The Session's state (first sight, ended, ``sub``/``agent_id`` unchanged), replay of the
Session JWT's and the proof's ``jti``, and the grant family of ``sgn`` are the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.access_token import AccessTokenClaims, verify_access_token
from frontdoor_protocol.delegated_session import (
    DEFAULT_SESSION_MAX_AGE,
    DelegatedSession,
    SessionHeader,
    parse_poppy_session,
    poppy_session_value,
    verify_poppy_session,
)
from frontdoor_protocol.delegation import DelegationCache
from frontdoor_protocol.dpop_proof import DEFAULT_DPOP_IAT_WINDOW, DPoPProof, verify_dpop_proof
from frontdoor_protocol.errors import ChallengeScheme, ErrorCode, ProtocolError
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM
from frontdoor_protocol.resource_request import AUTH_SCHEMES, TOKEN68, RequestHeaders, has_token_in_url, header_values

__all__ = [
    "DelegatedCaller",
    "DelegatedRequest",
    "authorization_credentials",
    "parse_delegated_request",
    "verify_delegated_request",
]

# An auth-param: token BWS "=" ... (RFC 7235 §2.1); anything else starts a credential.
_AUTH_PARAM: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+[ \t]*=")


class DelegatedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed, unverified 1.0 request.

    Attributes:
        session: The parsed ``Poppy-Session``; ``session.client_id`` names the keys to load.
        scheme: The ``Authorization`` scheme, ``None`` when no access token was sent.
        access_token: The token, ``None`` when none was sent.
        dpop_proofs: Every ``DPoP`` header value, in order.
    """

    session: SessionHeader
    scheme: ChallengeScheme | None
    access_token: str | None
    dpop_proofs: tuple[str, ...]


class DelegatedCaller(msgspec.Struct, frozen=True, kw_only=True):
    """A request whose Session JWT, access token and proof passed every stateless check.

    Attributes:
        session: The verified Session claims.
        token: The access token's claims; ``None`` for a signed-out request.
        scheme: The scheme the token was sent with.
        proof: The DPoP proof of a bound token; store ``(proof.jkt, proof.jti)`` until
            ``proof.accept_until`` to refuse a replay.
    """

    session: DelegatedSession
    token: AccessTokenClaims | None
    scheme: ChallengeScheme | None
    proof: DPoPProof | None


def _list_elements(value: str) -> Iterable[str]:
    """Split a header value on commas outside quoted strings (RFC 9110 §5.6.1, §5.6.4)."""
    if '"' not in value:  # the usual case (a token68): no quoted string, so every comma splits
        yield from (part.strip(" \t") for part in value.split(","))
        return
    element: list[str] = []
    quoted = escaped = False
    for char in value:
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            yield "".join(element).strip(" \t")
            element = []
            continue
        element.append(char)
    yield "".join(element).strip(" \t")


def authorization_credentials(value: str) -> list[str]:
    """The credentials one ``Authorization`` value holds, each ``scheme [token68 / params]``.

    A comma-separated element that is an auth-param (``name=value``) belongs to the
    credential before it; any other non-empty element starts a new credential. Nothing
    inside a quoted string counts.

    Args:
        value: One ``Authorization`` header value.

    Returns:
        The credentials, in order (usually one).
    """
    credentials: list[str] = []
    for element in _list_elements(value):
        if not element:
            continue
        if credentials and _AUTH_PARAM.match(element) is not None:
            credentials[-1] = f"{credentials[-1]}, {element}"
        else:
            credentials.append(element)
    return credentials


def _access_token(headers: RequestHeaders) -> tuple[ChallengeScheme | None, str | None]:
    authorizations = header_values(headers, "authorization")
    if len(authorizations) > 1:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "the request has more than one Authorization header")
    if not authorizations:
        return None, None
    credentials = authorization_credentials(authorizations[0])
    if len(credentials) > 1:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "the request has more than one credential")
    if not credentials:
        return None, None
    name, _, rest = credentials[0].partition(" ")
    scheme = AUTH_SCHEMES.get(name.lower())  # auth-scheme is case-insensitive (RFC 7235 §2.1)
    if scheme is None:
        return None, None
    token = rest.lstrip(" ")
    if TOKEN68.fullmatch(token) is None:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "the access token is malformed")
    return scheme, token


def parse_delegated_request(
    *,
    headers: RequestHeaders,
    url: str,
    query_params: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    allow_http_loopback: bool = False,
    delegations: DelegationCache | None = None,
) -> DelegatedRequest:
    """Parse a 1.0 request's credentials (steps 1 to 3); nothing is verified yet.

    Args:
        headers: The request headers, repeats kept.
        url: The request URL, with its query.
        query_params: The parsed query, if the caller has it; else read from ``url``.
        allow_http_loopback: Development only: accept an ``http://`` loopback client.
        delegations: The caller's cache of verified delegations (pass the same one to
            :func:`verify_delegated_request`).

    Returns:
        The parsed request.

    Raises:
        ProtocolError: ``invalid_request`` (token in the URL, two credentials),
            ``invalid_session`` (no, two or a malformed ``Poppy-Session``) or
            ``invalid_token`` (a malformed token).
    """
    if has_token_in_url(url, query_params):
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "access tokens are not accepted in the URL")
    value = poppy_session_value(headers)
    if value is None:
        raise ProtocolError(ErrorCode.INVALID_SESSION, "the request has no Poppy-Session header")
    session = parse_poppy_session(value, allow_http_loopback=allow_http_loopback, delegations=delegations)
    scheme, token = _access_token(headers)
    return DelegatedRequest(
        session=session,
        scheme=scheme,
        access_token=token,
        dpop_proofs=tuple(header_values(headers, "dpop")),
    )


def verify_delegated_request(
    request: DelegatedRequest,
    *,
    method: str,
    url: str,
    identity_keys: KeySet,
    issuer_keys: KeySet,
    issuer: str,
    now: int,
    audiences: Collection[str] | None = None,
    max_age: int = DEFAULT_SESSION_MAX_AGE,
    dpop_iat_window: tuple[int, int] = DEFAULT_DPOP_IAT_WINDOW,
    allow_http_loopback: bool = False,
    dpop_algs: Collection[str] = (REQUIRED_DPOP_ALGORITHM,),
    delegations: DelegationCache | None = None,
) -> DelegatedCaller:
    """Verify a parsed 1.0 request (steps 4 to 6).

    Args:
        request: From :func:`parse_delegated_request`.
        method: The request method.
        url: The request URL as the agent addressed it.
        identity_keys: The identity keys of ``request.session.client_id``.
        issuer_keys: The tenant issuer's signing keys (its JWKS).
        issuer: The tenant's issuer: the company identifier the Session's ``aud`` names,
            and the access token's ``iss``.
        now: The current time, in seconds since the epoch.
        audiences: The access-token audiences this resource answers to; ``None`` is the
            issuer alone.
        max_age: Seconds a Session JWT's ``iat`` may be off ``now``.
        dpop_iat_window: Seconds a DPoP proof's ``iat`` may be before and after ``now``.
        allow_http_loopback: Development only: accept an ``http://`` loopback client.
        dpop_algs: The DPoP proof algorithms accepted.
        delegations: The caller's cache of verified delegations; ``None`` verifies each
            delegation in full.

    Returns:
        The verified Session, token and proof.

    Raises:
        UnknownAgentKeyId: ``invalid_session``; reload the agent's identity keys once.
        UnknownKeyId: ``invalid_token``; the access token's ``kid`` is not in
            ``issuer_keys``: refetch the issuer's JWKS once.
        ProtocolError: ``invalid_session``, ``invalid_token`` or ``invalid_dpop_proof``.
    """
    session = verify_poppy_session(
        request.session,
        identity_keys=identity_keys,
        audience=issuer,
        method=method,
        url=url,
        now=now,
        access_token=request.access_token,
        max_age=max_age,
        allow_http_loopback=allow_http_loopback,
        delegations=delegations,
    )
    if request.access_token is None or request.scheme is None:
        return DelegatedCaller(session=session, token=None, scheme=None, proof=None)
    claims = verify_access_token(request.access_token, issuer=issuer, keys=issuer_keys, now=now, audiences=audiences)
    if claims.client_id != session.client_id:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "the access token is for another client")
    if request.scheme is ChallengeScheme.BEARER:
        if claims.cnf is not None:
            raise ProtocolError(ErrorCode.INVALID_TOKEN, "a DPoP-bound token must be sent with the DPoP scheme")
        return DelegatedCaller(session=session, token=claims, scheme=request.scheme, proof=None)
    if claims.cnf is None:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "a Bearer token must be sent with the Bearer scheme")
    if len(request.dpop_proofs) != 1:
        raise ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "the request needs exactly one DPoP header")
    proof = verify_dpop_proof(
        request.dpop_proofs[0],
        method=method,
        url=url,
        now=now,
        access_token=request.access_token,
        expected_jkt=claims.cnf.jkt,
        iat_window=dpop_iat_window,
        allowed_algs=dpop_algs,
    )
    return DelegatedCaller(session=session, token=claims, scheme=request.scheme, proof=proof)
