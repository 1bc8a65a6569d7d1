"""The closed error catalogue and ProtocolError (RFC 6749 §5.2, RFC 6750 §3, RFC 9449 §7.1)."""

from __future__ import annotations

import pickle

import pytest
from frontdoor_protocol import CATALOGUE, ChallengeScheme, ErrorCode, ProtocolError, Surface


def test_catalogue_is_closed_one_entry_per_code() -> None:
    """Every code has exactly one entry, keyed by itself; nothing else is accepted."""
    assert set(CATALOGUE) == set(ErrorCode)
    assert all(entry.code is code for code, entry in CATALOGUE.items())
    with pytest.raises(ValueError):
        ProtocolError("not_a_protocol_error")
    with pytest.raises(TypeError):
        CATALOGUE[ErrorCode.INVALID_GRANT] = CATALOGUE[ErrorCode.INVALID_SCOPE]  # type: ignore[index]


@pytest.mark.parametrize(
    ("code", "oauth", "resource", "challenged"),
    [
        ("invalid_request", 400, 400, False),  # RFC 6749 §5.2
        ("invalid_client", 401, 401, False),  # PAP-4.1-05: bad client assertion
        ("invalid_grant", 400, 400, False),  # PAP-4.8-05: rotated Account Token
        ("invalid_scope", 400, 400, False),  # PAP-4.4-02: wider than allowed
        ("unsupported_grant_type", 400, 400, False),
        ("authorization_pending", 400, 400, False),  # RFC 8628 §3.5
        ("slow_down", 400, 400, False),
        ("expired_token", 400, 400, False),
        ("invalid_session", 400, 400, False),  # PAP-4.8-03
        ("account_mismatch", 400, 400, False),  # PAP-4.8-04
        ("invalid_token", 401, 401, True),  # PAP-4.8-01: Account Token at an API
        ("invalid_dpop_proof", 400, 401, True),  # RFC 9449 §5 vs §7.1
        ("use_dpop_nonce", 400, 401, True),  # RFC 9449 §8 vs §9
        ("sign_in_required", 403, 403, True),
        ("insufficient_scope", 403, 403, True),  # RFC 6750 §3.1
        ("extension_required", 403, 403, True),  # OPS-2-01
        ("user_approval_required", 403, 403, False),  # OPS-5.1-05
        ("operation_not_found", 404, 404, False),  # OPS-3.2-01
        ("terms_changed", 409, 409, False),  # OPS-3.1-01
        ("rate_limited", 429, 429, False),  # PAP-4.3-18
        ("temporarily_unavailable", 503, 503, False),
        ("server_error", 500, 500, False),
    ],
)
def test_catalogue_statuses(code: str, oauth: int, resource: int, challenged: bool) -> None:
    """Each code answers with the status its defining document gives, per surface."""
    error = ProtocolError(code)
    assert error.status_at(Surface.OAUTH) == error.status == oauth
    assert error.status_at(Surface.RESOURCE) == resource
    assert (error.challenge() is not None) is challenged


def test_pap_4_3_18_rate_limited_names_retry_after() -> None:
    """PAP-4.3-18: a 429 goes with Retry-After; the entry says so for the edge."""
    assert CATALOGUE[ErrorCode.RATE_LIMITED].companion_header == "Retry-After"


def test_pap_4_3_21_use_dpop_nonce_names_dpop_nonce_header() -> None:
    """PAP-4.3-21 / RFC 9449 §8: use_dpop_nonce carries a fresh DPoP-Nonce."""
    assert CATALOGUE[ErrorCode.USE_DPOP_NONCE].companion_header == "DPoP-Nonce"


def test_insufficient_scope_challenge_names_the_scope() -> None:
    """RFC 6750 §3.1: insufficient_scope says which scope is needed, in body and challenge."""
    error = ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, scope="poppy:write")
    assert error.to_body() == {"error": "insufficient_scope", "scope": "poppy:write"}
    assert error.challenge() == 'DPoP error="insufficient_scope", scope="poppy:write"'


def test_ops_2_01_extension_required_names_the_extension() -> None:
    """OPS-2-01 / PAP §3.3: extension_required names the extension in body and challenge."""
    error = ProtocolError(ErrorCode.EXTENSION_REQUIRED, extension="operations")
    assert error.status == 403
    assert error.to_body() == {"error": "extension_required", "extension": "operations"}
    assert error.challenge() == 'DPoP error="extension_required", extension="operations"'


def test_pap_4_3_10_bearer_mcp_challenge_uses_bearer_scheme() -> None:
    """PAP-4.3-10: at a Bearer-only MCP server the challenge uses the Bearer scheme, without algs."""
    error = ProtocolError(ErrorCode.INVALID_TOKEN)
    assert error.challenge(ChallengeScheme.BEARER, algs=["ES256"]) == 'Bearer error="invalid_token"'


def test_rfc9449_7_1_dpop_challenge_lists_algs() -> None:
    """RFC 9449 §7.1: a DPoP challenge may list the accepted proof algorithms."""
    error = ProtocolError(ErrorCode.INVALID_DPOP_PROOF).with_description("Proof is stale")
    assert error.challenge(algs=["ES256", "RS256"]) == (
        'DPoP error="invalid_dpop_proof", error_description="Proof is stale", algs="ES256 RS256"'
    )
    with pytest.raises(ValueError):
        error.challenge(algs=['ES256" realm="x'])


def test_body_only_codes_have_no_challenge() -> None:
    """Codes answered in the JSON body only never produce WWW-Authenticate."""
    assert ProtocolError(ErrorCode.TERMS_CHANGED).challenge() is None
    assert ProtocolError(ErrorCode.INVALID_CLIENT).challenge() is None


def test_with_description_returns_a_copy() -> None:
    """Adding detail returns a new error (fosite's WithHint); the original is unchanged."""
    base = ProtocolError(ErrorCode.INVALID_GRANT)
    detailed = base.with_description("The Account Token was rotated")
    assert base.description is None and base.to_body() == {"error": "invalid_grant"}
    assert detailed.to_body() == {"error": "invalid_grant", "error_description": "The Account Token was rotated"}
    assert detailed is not base and detailed.code is base.code


def test_with_description_keeps_scope_and_extension() -> None:
    """A copy keeps the other details."""
    error = ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, scope="poppy:write").with_description("Needs write")
    assert error.scope == "poppy:write"


@pytest.mark.parametrize("text", ['has "quotes"', "back\\slash", "new\nline", "caf\u00e9", "", "x" * 201])
def test_rfc6749_5_2_description_charset_enforced(text: str) -> None:
    """RFC 6749 §5.2: error_description is printable ASCII without '"' or '\\', so it never breaks a header."""
    with pytest.raises(ValueError):
        ProtocolError(ErrorCode.INVALID_REQUEST).with_description(text)


def test_scope_and_extension_values_validated() -> None:
    """Only wire-safe scope and extension values can be attached."""
    with pytest.raises(ValueError):
        ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, scope='a"b')
    with pytest.raises(ValueError):
        ProtocolError(ErrorCode.EXTENSION_REQUIRED, extension="Not An Extension")


def test_protocol_error_is_immutable() -> None:
    """The catalogue's errors can be shared: nobody can change one in place."""
    error = ProtocolError(ErrorCode.INVALID_TOKEN)
    with pytest.raises(AttributeError):
        error._description = "changed"
    with pytest.raises(AttributeError):
        error.other = 1
    with pytest.raises(AttributeError):
        del error._entry


def test_protocol_error_can_be_raised_noted_and_pickled() -> None:
    """It behaves as an exception: raised, given notes, pickled for a worker, compared by value."""
    error = ProtocolError(ErrorCode.EXTENSION_REQUIRED, "Declare operations", extension="operations")
    with pytest.raises(ProtocolError) as raised:
        raise error
    raised.value.add_note("context for logs")
    assert pickle.loads(pickle.dumps(error)) == error
    assert hash(ProtocolError("slow_down")) == hash(ProtocolError(ErrorCode.SLOW_DOWN))
    assert ProtocolError("slow_down") != ProtocolError("slow_down", "Poll less often")


def test_str_holds_only_code_and_description() -> None:
    """GUIDE-secrets-01: the rendering of an error holds nothing but what Frontdoor wrote."""
    assert str(ProtocolError(ErrorCode.INVALID_TOKEN)) == "invalid_token"
    assert str(ProtocolError(ErrorCode.INVALID_TOKEN, "Expired")) == "invalid_token: Expired"
