"""RFC 8414 metadata with poppy_domains (PAP §3.2)."""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol import GrantType, build_metadata, check_metadata, metadata_url

from .pap_fixtures import conformance_cases

_ISSUER = "https://auth.provider.example/shop-a"


def _build(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "issuer": _ISSUER,
        "domains": ["shop-a.example"],
        "jwks_uri": _ISSUER + "/jwks.json",
        "token_endpoint": _ISSUER + "/oauth/token",
        "revocation_endpoint": _ISSUER + "/oauth/revoke",
    }
    arguments.update(changes)
    return build_metadata(**arguments)


@pytest.mark.parametrize(
    ("issuer", "url"),
    [
        ("https://auth.example.com", "https://auth.example.com/.well-known/oauth-authorization-server"),
        ("https://auth.example.com/", "https://auth.example.com/.well-known/oauth-authorization-server"),
        (_ISSUER, "https://auth.provider.example/.well-known/oauth-authorization-server/shop-a"),
        (_ISSUER + "/", "https://auth.provider.example/.well-known/oauth-authorization-server/shop-a"),
        ("https://h.example:8443/t/a", "https://h.example:8443/.well-known/oauth-authorization-server/t/a"),
    ],
)
def test_pap_3_2_08_metadata_url_inserts_well_known_path(issuer: str, url: str) -> None:
    """PAP-3.2-08 / RFC 8414 §3.1: a per-company path issuer has metadata at the path-inserted URL."""
    assert metadata_url(issuer) == url


def test_pap_3_2_07_peer_suite_issuer_with_a_path() -> None:
    """PAP-3.2-07: the peer suite serves a path issuer's metadata exactly where metadata_url points."""
    case = next(c for c in conformance_cases("protocol", "discovery") if c["id"] == "protocol.issuer-with-a-path")
    issuer = case["input"]["responses"]["https://shop-a.example/.well-known/poppy.json"]["json"]["auth"]["issuer"]
    assert metadata_url(issuer) in case["input"]["responses"]


@pytest.mark.parametrize("issuer", ["http://auth.example.com", "https://auth.example.com/?t=a", "https://a.example/#x"])
def test_rfc8414_2_issuer_must_be_https_without_query_or_fragment(issuer: str) -> None:
    """RFC 8414 §2: an issuer is an https URL without query or fragment."""
    with pytest.raises(ValueError):
        metadata_url(issuer)


def test_sessions_only_metadata_has_exactly_the_needed_members() -> None:
    """PAP-3.2-01: with only Sessions and Account Tokens enabled, no sign-in endpoints are published."""
    metadata = _build()
    assert metadata == {
        "issuer": _ISSUER,
        "poppy_domains": ["shop-a.example"],
        "jwks_uri": _ISSUER + "/jwks.json",
        "token_endpoint": _ISSUER + "/oauth/token",
        "revocation_endpoint": _ISSUER + "/oauth/revoke",
        "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer", "refresh_token"],
        "response_types_supported": [],
        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "revocation_endpoint_auth_methods_supported": ["private_key_jwt"],
        "revocation_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256"],
        "dpop_signing_alg_values_supported": ["ES256"],
        "scopes_supported": ["poppy:read", "poppy:write"],
    }


def test_direct_and_device_sign_in_members() -> None:
    """PAP §4.5, §4.6: enabled sign-in types add their endpoint, PKCE S256 and the iss parameter."""
    metadata = _build(
        grant_types=list(GrantType),
        authorization_endpoint=_ISSUER + "/oauth/authorize",
        device_authorization_endpoint=_ISSUER + "/oauth/device",
    )
    assert metadata["authorization_endpoint"] == _ISSUER + "/oauth/authorize"
    assert metadata["device_authorization_endpoint"] == _ISSUER + "/oauth/device"
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert set(metadata["grant_types_supported"]) == {grant.value for grant in GrantType}


def test_pap_3_2_01_every_domain_listed_and_accepted() -> None:
    """PAP-3.2-01, PAP-3.2-04: each domain naming the issuer is listed; the agent check passes for each."""
    metadata = _build(domains=["shop-a.example", "Shop-A.co.uk", "shop-a.example"])
    assert metadata["poppy_domains"] == ["shop-a.example", "shop-a.co.uk"]
    for domain in ("shop-a.example", "shop-a.co.uk"):
        assert check_metadata(metadata, _ISSUER, domain) == []


def test_pap_3_2_10_dpop_algorithms_must_include_es256() -> None:
    """PAP-3.2-10: a listed DPoP algorithm set always includes ES256."""
    assert _build(dpop_signing_algs=["ES256", "PS256"])["dpop_signing_alg_values_supported"] == ["ES256", "PS256"]
    with pytest.raises(ValueError, match="ES256"):
        _build(dpop_signing_algs=["RS256"])


@pytest.mark.parametrize("algs", [["HS256"], ["none"], ["ES256", "HS512"], []])
def test_pap_4_3_20_only_asymmetric_algorithms(algs: list[str]) -> None:
    """PAP-4.3-20, GUIDE-jwt-02: none and HMAC algorithms are never offered."""
    with pytest.raises(ValueError):
        _build(dpop_signing_algs=algs)
    with pytest.raises(ValueError):
        _build(assertion_signing_algs=algs)


def test_endpoints_follow_grant_types() -> None:
    """A sign-in endpoint is published exactly when its grant is enabled, and Sessions cannot be off."""
    with pytest.raises(ValueError):
        _build(authorization_endpoint=_ISSUER + "/oauth/authorize")
    with pytest.raises(ValueError):
        _build(grant_types=[GrantType.JWT_BEARER, GrantType.DEVICE_CODE])
    with pytest.raises(ValueError):
        _build(grant_types=[GrantType.REFRESH_TOKEN])


def test_pap_3_05_endpoints_must_be_https() -> None:
    """PAP-3-05: metadata URLs are https."""
    with pytest.raises(ValueError):
        _build(token_endpoint="http://auth.provider.example/shop-a/oauth/token")


def test_bad_domains_and_scopes_refused() -> None:
    """PAP-3.2-01, RFC 6749 §3.3: domains are DNS names; scopes are scope-tokens."""
    with pytest.raises(ValueError):
        _build(domains=["https://shop-a.example"])
    with pytest.raises(ValueError):
        _build(scopes=["two words"])


def test_issuer_without_verified_domains_lists_none() -> None:
    """A tenant whose domains are not verified yet still has metadata, with no domain listed."""
    assert _build(domains=[])["poppy_domains"] == []


def test_http_loopback_only_in_dev() -> None:
    """PAP-3-05: https everywhere; the dev escape hatch admits loopback http only."""
    kwargs = {"issuer": "http://127.0.0.1:8001/shop", "jwks_uri": "http://127.0.0.1:8001/shop/jwks.json",
              "token_endpoint": "http://127.0.0.1:8001/shop/oauth/token",
              "revocation_endpoint": "http://127.0.0.1:8001/shop/oauth/revoke"}
    with pytest.raises(ValueError):
        _build(**kwargs)
    assert _build(**kwargs, allow_http_loopback=True)["issuer"] == "http://127.0.0.1:8001/shop"
    with pytest.raises(ValueError):
        _build(**{**kwargs, "issuer": "http://shop.example/shop"}, allow_http_loopback=True)
