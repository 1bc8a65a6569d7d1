"""build_discovery_document: the poppy.json Frontdoor generates per domain (PAP §3)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from frontdoor_protocol import (
    ApiListing,
    Auth,
    DiscoveryInputs,
    InvalidDiscoveryInputs,
    MediatedField,
    MediatedSignIn,
    SignInOffer,
    UnsupportedProtocolVersion,
    build_discovery_document,
    check_discovery_document,
    discovery_url,
)

from .pap_fixtures import load_fixture

_AUTH = Auth(
    issuer="https://auth.provider.example/shop-a",
    direct=SignInOffer(scopes=("poppy:read", "poppy:write")),
)


def _inputs(**changes: Any) -> DiscoveryInputs:
    base = DiscoveryInputs(
        organization_name="Shop A",
        domain="shop-a.example",
        auth=_AUTH,
        apis=(ApiListing(type="openapi", url="https://api.shop-a.example/openapi.json", description="Orders"),),
    )
    return msgspec.structs.replace(base, **changes)


def _codes(error: pytest.ExceptionInfo[InvalidDiscoveryInputs]) -> list[str]:
    return [finding.code for finding in error.value.findings]


def test_pap_3_01_published_at_the_well_known_path() -> None:
    """PAP-3-01: each domain publishes at https://{domain}/.well-known/poppy.json."""
    assert discovery_url("shop-a.example") == "https://shop-a.example/.well-known/poppy.json"


def test_reproduces_the_fixture_document() -> None:
    """The member names and shapes match the peer SDK's example document exactly."""
    fixture = load_fixture("discovery-valid.json")
    auth = fixture["auth"]
    inputs = DiscoveryInputs(
        organization_name=fixture["organization"]["name"],
        domain=fixture["organization"]["domain"],
        auth=Auth(
            issuer=auth["issuer"],
            direct=SignInOffer(scopes=tuple(auth["direct"]["scopes"])),
            device=SignInOffer(scopes=tuple(auth["device"]["scopes"])),
            mediated=MediatedSignIn(
                endpoint=auth["mediated"]["endpoint"],
                fields=tuple(MediatedField(**field) for field in auth["mediated"]["fields"]),
                scopes=tuple(auth["mediated"]["scopes"]),
            ),
            custom_scopes=auth["custom_scopes"],
        ),
        conversation_endpoint=fixture["agent"]["protocols"][0]["endpoint"],
        apis=tuple(ApiListing(**api) for api in fixture["apis"]),
        feedback_endpoint=fixture["feedback"]["endpoint"],
        operations_endpoint=fixture["extensions"]["operations"]["endpoint"],
    )
    assert build_discovery_document(inputs) == fixture


def test_pap_3_1_02_organization_domain_is_the_publishing_domain() -> None:
    """PAP-3.1-02: the generated document names the domain it is published on, and passes the agent's check."""
    doc = build_discovery_document(_inputs(domain="shop-a.co.uk"))
    assert doc["organization"] == {"name": "Shop A", "domain": "shop-a.co.uk"}
    assert check_discovery_document(doc, "shop-a.co.uk") == []


def test_pap_3_2_06_same_auth_on_every_domain() -> None:
    """PAP-3.2-06: every domain of a tenant gets the identical auth member."""
    first = build_discovery_document(_inputs(domain="shop-a.example"))
    second = build_discovery_document(_inputs(domain="shop-a.co.uk"))
    assert (
        first["auth"]
        == second["auth"]
        == {
            "issuer": "https://auth.provider.example/shop-a",
            "direct": {"scopes": ["poppy:read", "poppy:write"]},
        }
    )
    assert first["organization"]["domain"] != second["organization"]["domain"]


def test_only_enabled_parts_are_published() -> None:
    """PAP §3.1: members the tenant did not enable are absent, never null."""
    doc = build_discovery_document(_inputs())
    assert set(doc) == {"protocol_version", "organization", "auth", "apis"}
    assert doc["protocol_version"] == "0.2"


def test_ops_operations_extension_published_when_enabled() -> None:
    """OPS-2-01: the Operations extension v1 with its endpoint, only when the tenant turns it on."""
    doc = build_discovery_document(_inputs(operations_endpoint="https://ledger.provider.example/shop-a/operations"))
    assert doc["extensions"] == {
        "operations": {"version": "1", "endpoint": "https://ledger.provider.example/shop-a/operations"}
    }


def test_pap_8_01_feedback_and_web_when_enabled() -> None:
    """PAP-8-01, PAP §5: feedback and web.browser_session_endpoint appear when configured."""
    doc = build_discovery_document(
        _inputs(
            feedback_endpoint="https://auth.provider.example/shop-a/feedback",
            browser_session_endpoint="https://shop-a.example/poppy/browser-session",
            conversation_endpoint="https://api.shop-a.example/poppy/conversations",
        )
    )
    assert doc["feedback"] == {"endpoint": "https://auth.provider.example/shop-a/feedback"}
    assert doc["web"] == {"browser_session_endpoint": "https://shop-a.example/poppy/browser-session"}
    assert doc["agent"] == {
        "protocols": [{"type": "poppy", "endpoint": "https://api.shop-a.example/poppy/conversations"}]
    }


def test_website_alone_publishes_empty_web() -> None:
    """PAP §5: a company with only a website publishes "web": {}."""
    doc = build_discovery_document(_inputs(apis=(), website=True))
    assert doc["web"] == {}


def test_pap_3_05_http_endpoint_refused() -> None:
    """PAP-3-05: the builder never publishes an http URL."""
    with pytest.raises(InvalidDiscoveryInputs) as error:
        build_discovery_document(_inputs(feedback_endpoint="http://auth.provider.example/shop-a/feedback"))
    assert _codes(error) == ["not_https"]
    assert error.value.findings[0].pointer == "/feedback/endpoint"


def test_custom_scope_in_protocol_namespace_refused() -> None:
    """PAP-4.4-03: a tenant cannot define scopes under poppy:."""
    auth = Auth(issuer=_AUTH.issuer, direct=SignInOffer(scopes=("poppy:admin",)), custom_scopes={"poppy:admin": "All"})
    with pytest.raises(InvalidDiscoveryInputs) as error:
        build_discovery_document(_inputs(auth=auth))
    assert _codes(error) == ["invalid_field"]


def test_offered_scope_must_be_described() -> None:
    """PAP §4.4: a sign-in type cannot offer a scope users are not told about."""
    auth = Auth(issuer=_AUTH.issuer, device=SignInOffer(scopes=("poppy:read", "loyalty")))
    with pytest.raises(InvalidDiscoveryInputs) as error:
        build_discovery_document(_inputs(auth=auth))
    assert _codes(error) == ["undescribed_scope"]


def test_nothing_offered_refused() -> None:
    """PAP §3.1: a document must offer an agent, APIs or a website."""
    with pytest.raises(InvalidDiscoveryInputs) as error:
        build_discovery_document(_inputs(apis=()))
    assert _codes(error) == ["nothing_offered"]


def test_bad_domain_refused() -> None:
    """PAP-3.1-02: the domain must be a DNS name."""
    with pytest.raises(InvalidDiscoveryInputs) as error:
        build_discovery_document(_inputs(domain="https://shop-a.example"))
    assert "invalid_field" in _codes(error)


def test_pap_3_1_01_unknown_profile_refused() -> None:
    """PAP-3.1-01: only versions with a profile can be published."""
    with pytest.raises(UnsupportedProtocolVersion):
        build_discovery_document(_inputs(protocol_version="0.3"))
