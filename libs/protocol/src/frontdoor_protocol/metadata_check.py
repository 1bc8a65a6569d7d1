"""Checks an issuer's RFC 8414 metadata the way an agent relies on it (PAP §3.2).

An agent uses a company's ``poppy.json`` only after the metadata at
:func:`~frontdoor_protocol.metadata_url` has exactly the document's ``auth.issuer``
(PAP-3.2-03) and lists the document's domain in ``poppy_domains`` (PAP-3.2-04). The rest
are the members the protocol's flows need, checked so a misconfigured issuer is caught
before an agent meets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from frontdoor_protocol.authorization_server_metadata import CLIENT_AUTH_METHOD, GrantType
from frontdoor_protocol.domain_name import domains_equal, is_domain_name
from frontdoor_protocol.finding import Finding, FindingCode, Findings, excerpt, json_type_name
from frontdoor_protocol.https_url import check_https_url
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM, is_asymmetric_algorithm

__all__ = ["check_metadata"]

_C = FindingCode
_REQUIRED_ENDPOINTS: Final = (("token_endpoint", "PAP-4.8-01"), ("revocation_endpoint", "PAP-4.8-01"))
_OPTIONAL_URLS: Final = ("jwks_uri", "authorization_endpoint", "device_authorization_endpoint")


def check_metadata(doc: object, expected_issuer: str, domain: str) -> list[Finding]:
    """Validate parsed authorization server metadata.

    Args:
        doc: The decoded metadata (decode with :func:`frontdoor_protocol.loads`).
        expected_issuer: The ``auth.issuer`` of the ``poppy.json`` that led here.
        domain: That document's ``organization.domain``.

    Returns:
        Every problem found; no errors means an agent accepts the issuer for ``domain``.
    """
    findings = Findings()
    if not isinstance(doc, dict):
        findings.error(
            _C.NOT_OBJECT,
            "",
            f"The metadata is {json_type_name(doc)}, not a JSON object.",
            "Serve the RFC 8414 metadata object.",
            "PAP-3.2-01",
        )
        return findings
    _check_issuer(doc.get("issuer"), expected_issuer, findings)
    for member, requirement in _REQUIRED_ENDPOINTS:
        if doc.get(member) is None:
            findings.error(
                _C.MISSING_FIELD,
                f"/{member}",
                f"{member} is missing.",
                f"Publish the https URL of the {member.replace('_', ' ')}.",
                requirement,
            )
        else:
            check_https_url(findings, doc[member], f"/{member}")
    for member in _OPTIONAL_URLS:
        if doc.get(member) is not None:
            check_https_url(findings, doc[member], f"/{member}")
    _check_domains(doc.get("poppy_domains"), domain, findings)
    _check_dpop_algorithms(doc.get("dpop_signing_alg_values_supported"), findings)
    _check_client_auth(doc, findings)
    if doc.get("authorization_endpoint") is not None:
        _check_direct(doc, findings)
    _check_grant_types(doc, findings)
    return findings


def _check_issuer(issuer: object, expected: str, findings: Findings) -> None:
    if issuer is None:
        findings.error(
            _C.MISSING_FIELD,
            "/issuer",
            "issuer is missing.",
            f"Set issuer to {excerpt(expected)}, exactly.",
            "PAP-3.2-03",
        )
        return
    if issuer != expected:
        close = isinstance(issuer, str) and issuer.rstrip("/") == expected.rstrip("/")
        findings.error(
            _C.ISSUER_MISMATCH,
            "/issuer",
            f"issuer is {excerpt(issuer)}, but auth.issuer is {excerpt(expected)}.",
            "They are compared character for character"
            + ("; a trailing slash makes another issuer." if close else ".")
            + " Publish the same string in both.",
            "PAP-3.2-03",
        )
    check_https_url(findings, issuer, "/issuer")


def _check_domains(value: object, domain: str, findings: Findings) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        findings.error(
            _C.MISSING_FIELD if value is None else _C.INVALID_FIELD,
            "/poppy_domains",
            "poppy_domains must be an array of domain names.",
            "List every domain whose poppy.json names this issuer.",
            "PAP-3.2-01",
        )
        return
    if not all(is_domain_name(item) for item in value):
        findings.error(
            _C.INVALID_FIELD,
            "/poppy_domains",
            "poppy_domains has an entry that is not a DNS name.",
            "Write bare host names, without scheme, port or path.",
            "PAP-3.2-01",
        )
    if not any(domains_equal(item, domain) for item in value):
        findings.error(
            _C.NOT_LISTED,
            "/poppy_domains",
            f"poppy_domains does not list {excerpt(domain)}.",
            "Add the domain once its poppy.json names this issuer; agents refuse it until then.",
            "PAP-3.2-04",
        )


def _check_dpop_algorithms(value: object, findings: Findings) -> None:
    if value is None:
        return
    pointer = "/dpop_signing_alg_values_supported"
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        findings.error(_C.INVALID_FIELD, pointer, "It must be an array of algorithm names.", '["ES256"]', "PAP-3.2-10")
        return
    if REQUIRED_DPOP_ALGORITHM not in value:
        findings.error(
            _C.ES256_MISSING,
            pointer,
            "dpop_signing_alg_values_supported does not include ES256.",
            "Accept and list ES256: it is the one algorithm every agent can use.",
            "PAP-3.2-10",
        )
    if not all(is_asymmetric_algorithm(item) for item in value):
        findings.error(
            _C.SYMMETRIC_ALGORITHM,
            pointer,
            "It lists none, an HMAC or an unknown algorithm.",
            "List only asymmetric algorithms such as ES256.",
            "PAP-4.3-20",
        )


def _check_client_auth(doc: Mapping[str, Any], findings: Findings) -> None:
    methods = doc.get("token_endpoint_auth_methods_supported")
    if isinstance(methods, list) and CLIENT_AUTH_METHOD not in methods:
        findings.error(
            _C.AUTH_METHOD_MISSING,
            "/token_endpoint_auth_methods_supported",
            "token_endpoint_auth_methods_supported omits private_key_jwt.",
            "Agents authenticate only with private_key_jwt; list it.",
            "PAP-4.1-05",
        )
    algs = doc.get("token_endpoint_auth_signing_alg_values_supported")
    if isinstance(algs, list) and not all(is_asymmetric_algorithm(alg) for alg in algs):
        findings.warning(
            _C.SYMMETRIC_ALGORITHM,
            "/token_endpoint_auth_signing_alg_values_supported",
            "Client assertion algorithms include none, an HMAC or an unknown algorithm.",
            "Accept ES256 and RS256 only.",
            "GUIDE-jwt-02",
        )


def _check_direct(doc: Mapping[str, Any], findings: Findings) -> None:
    methods = doc.get("code_challenge_methods_supported")
    if not isinstance(methods, list) or "S256" not in methods:
        findings.warning(
            _C.PKCE_S256_MISSING,
            "/code_challenge_methods_supported",
            "Direct Sign-In is offered but PKCE S256 is not listed.",
            'List "code_challenge_methods_supported": ["S256"].',
            "GUIDE-co-consent-02",
        )
    elif "plain" in methods:
        findings.warning(
            _C.PKCE_PLAIN_OFFERED,
            "/code_challenge_methods_supported",
            "PKCE plain is offered.",
            "Accept S256 only.",
            "GUIDE-co-consent-02",
        )
    if doc.get("authorization_response_iss_parameter_supported") is not True:
        findings.warning(
            _C.ISS_PARAMETER_MISSING,
            "/authorization_response_iss_parameter_supported",
            "The metadata does not say that redirects carry iss.",
            "Send iss on every redirect and publish authorization_response_iss_parameter_supported: true.",
            "GUIDE-co-consent-03",
        )


def _check_grant_types(doc: Mapping[str, Any], findings: Findings) -> None:
    grants = doc.get("grant_types_supported")
    if not isinstance(grants, list):
        return
    needed = [GrantType.JWT_BEARER]
    if doc.get("authorization_endpoint") is not None:
        needed.append(GrantType.AUTHORIZATION_CODE)
    if doc.get("device_authorization_endpoint") is not None:
        needed.append(GrantType.DEVICE_CODE)
    for grant in needed:
        if grant.value not in grants:
            findings.warning(
                _C.GRANT_TYPE_MISSING,
                "/grant_types_supported",
                f"grant_types_supported omits {grant.value}.",
                "List every grant the token endpoint accepts.",
                "RFC 8414 §2",
            )
