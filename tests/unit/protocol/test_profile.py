"""Protocol profiles (PAP §3.1 and the per-version differences)."""

from __future__ import annotations

import msgspec
import pytest
from frontdoor_protocol import (
    PROFILE_0_2,
    PROFILE_1_0,
    PROFILES,
    AssertionAudience,
    SessionCredential,
    UnsupportedProtocolVersion,
    parse_protocol_version,
    profile_for,
)

from .pap_fixtures import load_fixture


def test_pap_3_1_01_profile_for_exact_major_minor_only() -> None:
    """PAP-3.1-01: before 1.0 only the exact major.minor is served; neighbours are not."""
    assert profile_for("0.2") is PROFILE_0_2
    assert profile_for("1.0") is PROFILE_1_0
    # "0.3"/"0.4" are not aliases of 1.0 until checked against fixtures (ADR 0004 §1, Q1).
    for other in ("0.1", "0.3", "0.4", "1.1", "1.0.0", "0.2.0", " 0.2", ""):
        with pytest.raises(UnsupportedProtocolVersion):
            profile_for(other)


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("0.2", (0, 2)),
        ("1.0", (1, 0)),
        ("10.12", (10, 12)),
        ("0.1.2", None),
        ("02.0", None),
        ("v0.2", None),
        (0.2, None),
    ],
)
def test_pap_3_1_01_protocol_version_is_major_minor(value: object, parsed: tuple[int, int] | None) -> None:
    """PAP-3.1-01: a protocol_version is a major.minor string."""
    assert parse_protocol_version(value) == parsed


def test_pap_4_1_05_profile_0_2_assertion_audience_is_the_issuer() -> None:
    """PAP-4.1-05, PAP-4.2-07: in 0.2 assertions are addressed to auth.issuer, never the token endpoint."""
    assert PROFILE_0_2.assertion_audience is AssertionAudience.ISSUER
    audience = PROFILE_0_2.assertion_audience_for(
        issuer="https://auth.provider.example/shop-a", token_endpoint="https://auth.provider.example/shop-a/token"
    )
    assert audience == "https://auth.provider.example/shop-a"


def test_token_endpoint_audience_slot_for_older_profiles() -> None:
    """A profile whose assertions use the token endpoint (as 0.1 implementations do) is one value away."""
    older = msgspec.structs.replace(
        PROFILE_0_2,
        protocol_version="0.1",
        assertion_audience=AssertionAudience.TOKEN_ENDPOINT,
        feedback_endpoint=False,
    )
    assert older.assertion_audience_for(issuer="https://i.example", token_endpoint="https://i.example/t") == (
        "https://i.example/t"
    )


def test_profile_0_2_values() -> None:
    """PAP-4.2-08, PAP-5-06, PAP-3.2-09, PAP §8: the numbers and switches of draft 0.2."""
    assert PROFILE_0_2.protocol_version == "0.2"
    assert PROFILE_0_2.session_credential is SessionCredential.SESSION_TOKEN
    assert PROFILE_0_2.session_assertion_max_lifetime == 300
    assert PROFILE_0_2.browser_assertion_max_lifetime == 60
    assert PROFILE_0_2.required_dpop_algorithm == "ES256"
    assert PROFILE_0_2.feedback_endpoint is True
    assert PROFILE_0_2.operations_versions == frozenset({"1"})
    assert PROFILE_0_2.discovery_path == "/.well-known/poppy.json"


def test_profile_matches_the_fixture_document_version() -> None:
    """The example discovery document of the peer SDK is a 0.2 document."""
    assert load_fixture("discovery-valid.json")["protocol_version"] in PROFILES


def test_profiles_are_immutable() -> None:
    """A profile is a shared value: it cannot be changed in place."""
    with pytest.raises(AttributeError):
        PROFILE_0_2.feedback_endpoint = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        PROFILES["9.9"] = PROFILE_0_2  # type: ignore[index]
