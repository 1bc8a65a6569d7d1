"""PAP 1.0 discovery: AS metadata by served profiles, RFC 9728 metadata, poppy.json 1.0, the cross-check [S §2]."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from frontdoor_protocol import (
    CATALOGUE,
    PROFILE_1_0,
    ApiListing,
    Auth,
    DiscoveryInputs,
    ErrorCode,
    FindingCode,
    GrantType,
    MediatedField,
    MediatedSignIn,
    ProtocolError,
    SessionCredential,
    SignInOffer,
    Surface,
    build_discovery_document,
    build_metadata,
    build_protected_resource_metadata,
    check_discovery_documents,
    profile_for,
    protected_resource_metadata_url,
)

ISSUER = "https://auth.provider.example/shop-a"
DOMAIN = "shop-a.example"


def metadata(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "issuer": ISSUER,
        "domains": [DOMAIN, "Shop-B.example"],
        "jwks_uri": ISSUER + "/jwks.json",
        "token_endpoint": ISSUER + "/oauth/token",
        "revocation_endpoint": ISSUER + "/oauth/revoke",
    }
    arguments.update(changes)
    return build_metadata(**arguments)


# Profiles and errors.


def test_adr_0004_s1_profile_1_0_values() -> None:
    """ADR 0004 §1: PROFILE_1_0 uses delegated Session JWTs, company RFC 9728 metadata and Ops v1."""
    assert profile_for("1.0") is PROFILE_1_0
    assert PROFILE_1_0.session_credential is SessionCredential.DELEGATED_SESSION_JWT
    assert PROFILE_1_0.company_protected_resource_metadata and PROFILE_1_0.operations_versions == {"1"}
    assert not PROFILE_1_0.mediated_sign_in


def test_adr_0004_s7_session_ended_is_400_without_challenge() -> None:
    """ADR 0004 §5, §7: session_ended and invalid_session are 400 with no challenge at a resource."""
    for code in (ErrorCode.SESSION_ENDED, ErrorCode.INVALID_SESSION):
        error = ProtocolError(code)
        assert error.status_at(Surface.RESOURCE) == 400 and error.challenge() is None
    assert CATALOGUE[ErrorCode.SESSION_ENDED].code.value == "session_ended"


# AS metadata.


def test_adr_0004_s1_only_0_2_served_is_unchanged() -> None:
    """ADR 0004 §1: serving only 0.2 keeps the 0.2 members and order (test_authorization_server_metadata pins all)."""
    document = metadata(served=["0.2"])
    assert document["poppy_domains"] == [DOMAIN, "shop-b.example"] and "protected_resources" not in document
    assert list(document)[:3] == ["issuer", "poppy_domains", "jwks_uri"]


def test_s2_1_0_served_lists_protected_resources_and_no_session_grant() -> None:
    """[S §2], ADR 0004 §1: 1.0 only: protected_resources https://{domain}, no poppy_domains, no jwt-bearer grant."""
    document = metadata(served=["1.0"], grant_types=[GrantType.JWT_BEARER])
    assert document["protected_resources"] == ["https://shop-a.example", "https://shop-b.example"]
    assert "poppy_domains" not in document
    assert document["grant_types_supported"] == ["refresh_token"]


def test_adr_0004_s1_both_served_lists_both() -> None:
    """ADR 0004 §1: both served: poppy_domains and protected_resources, and the jwt-bearer grant stays."""
    document = metadata(served=["0.2", "1.0"], resources=["https://api.shop-a.example/mcp"])
    assert document["poppy_domains"] == [DOMAIN, "shop-b.example"]
    assert document["protected_resources"] == [
        "https://shop-a.example",
        "https://shop-b.example",
        "https://api.shop-a.example/mcp",
    ]
    assert GrantType.JWT_BEARER.value in document["grant_types_supported"]


def test_adr_0004_s1_unknown_served_profile_is_refused() -> None:
    """ADR 0004 §1 [Q1]: "0.3" is not an alias of 1.0."""
    with pytest.raises(LookupError):
        metadata(served=["0.3"])


# RFC 9728.


def test_rfc_9728_protected_resource_metadata() -> None:
    """RFC 9728 §2, [S §2]: resource exactly https://{domain}, the issuer listed, header-only tokens."""
    document = build_protected_resource_metadata(
        resource="https://shop-a.example",
        authorization_servers=[ISSUER],
        scopes_supported=["poppy:read"],
        resource_name="Shop A",
    )
    assert document == {
        "resource": "https://shop-a.example",
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["poppy:read"],
        "resource_name": "Shop A",
    }
    assert protected_resource_metadata_url("https://shop-a.example") == (
        "https://shop-a.example/.well-known/oauth-protected-resource"
    )


@pytest.mark.parametrize("resource", ["http://shop-a.example", "https://shop-a.example/?x=1"])
def test_rfc_9728_resource_must_be_https_without_query(resource: str) -> None:
    """RFC 9728 §1.2: a resource identifier is an https URL without query or fragment."""
    with pytest.raises(ValueError):
        build_protected_resource_metadata(resource=resource, authorization_servers=[ISSUER])


# poppy.json 1.0.


def test_s1_s5_poppy_json_1_0_omits_auth_mediated() -> None:
    """[S §1, §5]: 1.0 retired auth.mediated; protocol_version comes from the published profile."""
    auth = Auth(
        issuer=ISSUER,
        direct=SignInOffer(scopes=("poppy:read",)),
        mediated=MediatedSignIn(
            endpoint=ISSUER + "/mediated",
            fields=(MediatedField(name="email", label="Email", secret=False),),
            scopes=("poppy:read",),
        ),
    )
    inputs = DiscoveryInputs(
        organization_name="Shop A",
        domain=DOMAIN,
        auth=auth,
        apis=(ApiListing(type="openapi", url="https://api.shop-a.example/openapi.json", description="Orders"),),
    )
    old = build_discovery_document(inputs)
    new = build_discovery_document(msgspec.structs.replace(inputs, protocol_version="1.0"))
    assert old["protocol_version"] == "0.2" and "mediated" in old["auth"]
    assert new["protocol_version"] == "1.0" and "mediated" not in new["auth"]
    assert {k: v for k, v in old.items() if k not in ("protocol_version", "auth")} == {
        k: v for k, v in new.items() if k not in ("protocol_version", "auth")
    }


# The cross-check.


def documents() -> dict[str, Any]:
    return {
        "domain": DOMAIN,
        "poppy": {"protocol_version": "1.0", "auth": {"issuer": ISSUER}},
        "protected_resource": {"resource": "https://shop-a.example", "authorization_servers": [ISSUER]},
        "authorization_server": {"issuer": ISSUER, "protected_resources": ["https://shop-a.example"]},
    }


def codes(**changes: Any) -> list[FindingCode]:
    return [finding.code for finding in check_discovery_documents(**{**documents(), **changes})]


def test_s2_consistent_documents_have_no_findings() -> None:
    """[S §2]: the three documents agree."""
    assert codes() == []
    assert codes(poppy={"protocol_version": "1.0"}) == []  # one server: auth.issuer may be absent


@pytest.mark.parametrize("resource", ["https://shop-a.example/", "https://Shop-A.example", "https://shop-a.example:443"])
def test_s2_resource_must_be_exactly_https_domain(resource: str) -> None:
    """[S §2] "resource is exactly https://{organization.domain}": compared character for character."""
    protected = {"resource": resource, "authorization_servers": [ISSUER]}
    assert codes(protected_resource=protected) == [FindingCode.RESOURCE_MISMATCH]


def test_s2_issuer_must_be_an_authorization_server() -> None:
    """[S §2]: auth.issuer must equal a listed authorization server, exactly (a trailing slash differs)."""
    protected = {"resource": "https://shop-a.example", "authorization_servers": [ISSUER + "/"]}
    assert codes(protected_resource=protected) == [FindingCode.ISSUER_NOT_AUTHORIZATION_SERVER]


def test_s2_several_servers_need_auth_issuer() -> None:
    """[S §2] "Multiple authorization servers: auth.issuer is required"."""
    protected = {"resource": "https://shop-a.example", "authorization_servers": [ISSUER, "https://other.example"]}
    assert codes(protected_resource=protected, poppy={"protocol_version": "1.0"}) == [FindingCode.ISSUER_AMBIGUOUS]
    assert codes(protected_resource=protected) == []


def test_s2_as_issuer_must_equal_auth_issuer() -> None:
    """[S §2] "exact issuer equality" of the RFC 8414 metadata."""
    server = {"issuer": ISSUER + "/", "protected_resources": ["https://shop-a.example"]}
    assert codes(authorization_server=server) == [FindingCode.ISSUER_MISMATCH]


@pytest.mark.parametrize(
    "listed",
    [[], ["https://shop-b.example"], ["https://shop-a.example/"], ["https://shop-a.example:443"], "https://shop-a.example"],
)
def test_s2_protected_resources_must_list_the_domain(listed: object) -> None:
    """[S §2]: protected_resources contains the domain without path, port or trailing slash."""
    server = {"issuer": ISSUER, "protected_resources": listed}
    assert codes(authorization_server=server) == [FindingCode.RESOURCE_NOT_PROTECTED]


def test_s2_protected_resources_host_case_may_be_normalised() -> None:
    """[S §2] "(hostname case may be normalized)"."""
    server = {"issuer": ISSUER, "protected_resources": ["https://SHOP-A.example"]}
    assert codes(authorization_server=server) == []
