"""check_metadata: the issuer's metadata as an agent relies on it (PAP §3.2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from frontdoor_protocol import Finding, Severity, check_metadata, has_errors

from .pap_fixtures import load_fixture

_ISSUER = "https://auth.example.com"


def _metadata() -> dict[str, Any]:
    """The fixture, plus what Frontdoor also advertises for Direct Sign-In."""
    metadata: dict[str, Any] = copy.deepcopy(load_fixture("oauth-metadata-valid.json"))
    metadata["code_challenge_methods_supported"] = ["S256"]
    metadata["authorization_response_iss_parameter_supported"] = True
    return metadata


def _only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, findings
    return matching[0]


def test_fixture_metadata_is_accepted() -> None:
    """PAP-3.2-03, PAP-3.2-04: the peer SDK's example metadata is accepted for its domain.

    It offers Direct Sign-In without advertising PKCE S256 or the iss parameter, which are
    reported as warnings only.
    """
    findings = check_metadata(load_fixture("oauth-metadata-valid.json"), _ISSUER, "example.com")
    assert not has_errors(findings)
    assert sorted(f.code for f in findings) == ["iss_parameter_missing", "pkce_s256_missing"]
    assert check_metadata(_metadata(), _ISSUER, "example.com") == []


@pytest.mark.parametrize(
    "issuer", ["https://auth.example.com/", "https://Auth.example.com", "https://login.example.com"]
)
def test_pap_3_2_03_issuer_compared_character_for_character(issuer: str) -> None:
    """PAP-3.2-03: any difference, even a trailing slash or case, is issuer_mismatch."""
    metadata = _metadata()
    metadata["issuer"] = issuer
    finding = _only(check_metadata(metadata, _ISSUER, "example.com"), "issuer_mismatch")
    assert finding.severity is Severity.ERROR and finding.requirement == "PAP-3.2-03"


def test_pap_3_2_03_trailing_slash_hint() -> None:
    """PAP-3.2-03: the hint names the trailing slash when that is the only difference."""
    metadata = _metadata()
    metadata["issuer"] = _ISSUER + "/"
    assert "trailing slash" in _only(check_metadata(metadata, _ISSUER, "example.com"), "issuer_mismatch").hint


def test_pap_3_2_04_domain_must_be_listed() -> None:
    """PAP-3.2-04: a domain absent from poppy_domains is not_listed."""
    finding = _only(check_metadata(_metadata(), _ISSUER, "example.fr"), "not_listed")
    assert finding.requirement == "PAP-3.2-04" and finding.pointer == "/poppy_domains"


def test_pap_3_2_04_listing_ignores_case() -> None:
    """PAP-3.2-04: domains are compared ignoring case."""
    metadata = _metadata()
    metadata["poppy_domains"] = ["Example.COM"]
    assert check_metadata(metadata, _ISSUER, "example.com") == []


def test_pap_3_2_01_poppy_domains_required() -> None:
    """PAP-3.2-01: poppy_domains is required, as an array of DNS names."""
    metadata = _metadata()
    del metadata["poppy_domains"]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "missing_field").pointer == "/poppy_domains"
    metadata["poppy_domains"] = ["example.com", "https://example.org"]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "invalid_field").requirement == "PAP-3.2-01"


def test_pap_3_2_10_listed_dpop_algorithms_include_es256() -> None:
    """PAP-3.2-10: when dpop_signing_alg_values_supported is listed it includes ES256."""
    metadata = _metadata()
    metadata["dpop_signing_alg_values_supported"] = ["RS256"]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "es256_missing").requirement == "PAP-3.2-10"
    del metadata["dpop_signing_alg_values_supported"]
    assert check_metadata(metadata, _ISSUER, "example.com") == []


def test_pap_4_3_20_symmetric_dpop_algorithm_is_an_error() -> None:
    """PAP-4.3-20: DPoP proofs are never HMAC or unsigned."""
    metadata = _metadata()
    metadata["dpop_signing_alg_values_supported"] = ["ES256", "HS256"]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "symmetric_algorithm").is_error


@pytest.mark.parametrize("member", ["token_endpoint", "revocation_endpoint"])
def test_pap_4_8_01_token_and_revocation_endpoints_required(member: str) -> None:
    """PAP-4.8-01: Account Tokens are used at the token and revocation endpoints, so both exist."""
    metadata = _metadata()
    del metadata[member]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "missing_field").pointer == f"/{member}"


@pytest.mark.parametrize("member", ["token_endpoint", "authorization_endpoint", "device_authorization_endpoint"])
def test_pap_3_05_metadata_urls_are_https(member: str) -> None:
    """PAP-3-05: URLs in authorization server metadata are https."""
    metadata = _metadata()
    metadata[member] = metadata[member].replace("https://", "http://")
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "not_https").pointer == f"/{member}"


def test_pap_4_1_05_private_key_jwt_listed_when_methods_listed() -> None:
    """PAP-4.1-05: agents authenticate with private_key_jwt; a list without it is an error."""
    metadata = _metadata()
    metadata["token_endpoint_auth_methods_supported"] = ["client_secret_basic"]
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "auth_method_missing").is_error


def test_guide_co_consent_02_pkce_plain_is_a_warning() -> None:
    """GUIDE-co-consent-02: Direct Sign-In accepts PKCE S256 only."""
    metadata = _metadata()
    metadata["code_challenge_methods_supported"] = ["S256", "plain"]
    finding = _only(check_metadata(metadata, _ISSUER, "example.com"), "pkce_plain_offered")
    assert finding.severity is Severity.WARNING


def test_guide_co_consent_03_iss_parameter_advertised() -> None:
    """GUIDE-co-consent-03 / RFC 9207: with Direct Sign-In, metadata says redirects carry iss."""
    metadata = _metadata()
    metadata["authorization_response_iss_parameter_supported"] = False
    assert _only(check_metadata(metadata, _ISSUER, "example.com"), "iss_parameter_missing").severity is Severity.WARNING


def test_grant_types_cover_enabled_sign_in() -> None:
    """RFC 8414 §2: a listed grant_types_supported names the grants the endpoints imply."""
    metadata = _metadata()
    metadata["grant_types_supported"] = ["urn:ietf:params:oauth:grant-type:jwt-bearer", "refresh_token"]
    codes = [f.code for f in check_metadata(metadata, _ISSUER, "example.com")]
    assert codes == ["grant_type_missing", "grant_type_missing"]


@pytest.mark.parametrize("doc", [[], "metadata", None])
def test_metadata_must_be_an_object(doc: object) -> None:
    """RFC 8414 §3.2: the metadata is a JSON object."""
    assert [f.code for f in check_metadata(doc, _ISSUER, "example.com")] == ["not_object"]
