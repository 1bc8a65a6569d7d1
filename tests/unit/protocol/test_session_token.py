"""Session Tokens: minted by the issuer, verified by the company sdk (PAP §4.2, §4.3; RFC 9068).

Every refusal is ``invalid_token`` (RFC 6750 §3.1): 401 with a challenge at a resource.

Speed, measured with ``timeit`` on the development container (CPython 3.11, OpenSSL 3):
``verify_session_token`` ~80 µs per call, of which ~70 µs is the P-256 signature check
itself (joserfc's own ``jwt.decode`` of the same token: ~100 µs); ``mint_session_token``
~37 µs. No assertion on timing: machines differ.

    python -m timeit -s "..." "verify_session_token(token, issuer=ISSUER, keys=KEYS, now=NOW)"
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from frontdoor_protocol import (
    MAX_SESSION_TOKEN_LIFETIME,
    Confirmation,
    ErrorCode,
    ProtocolError,
    SessionTokenClaims,
    Surface,
    UnknownKeyId,
    mint_session_token,
    verify_session_token,
)
from joserfc.jwk import KeySet

from .jose_helpers import (
    CLIENT_ID,
    ISSUER,
    NOW,
    b64,
    ec_key,
    hs256_with_public_key,
    public,
    public_set,
    rsa_key,
    segment,
    sign,
    unsigned,
)

ISSUER_KEY = ec_key("iss-1")
KEYS = public_set(ISSUER_KEY)
MCP_URL = "https://shop.example/mcp"
JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
CLAIMS = SessionTokenClaims(
    iss=ISSUER,
    sub="usr_3q2-7wXyZ_abcdEFGH12",
    aud=ISSUER,
    client_id=CLIENT_ID,
    sid="ses_01JABCDEF",
    jti="stk_Yk2b0fWq3nQ9Jx1mK7vR0A",
    iat=NOW,
    exp=NOW + 3600,
    cnf=Confirmation(jkt=JKT),
)
MCP_CLAIMS = msgspec.structs.replace(CLAIMS, aud=MCP_URL, resource=MCP_URL, cnf=None)


def _verify(token: str, keys: KeySet = KEYS, **options: Any) -> SessionTokenClaims:
    arguments: dict[str, Any] = {"issuer": ISSUER, "keys": keys, "now": NOW + 10}
    arguments.update(options)
    return verify_session_token(token, **arguments)


def _refused(token: str, keys: KeySet = KEYS, **options: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        _verify(token, keys, **options)
    error = raised.value
    assert error.code is ErrorCode.INVALID_TOKEN
    assert error.status_at(Surface.RESOURCE) == 401
    assert error.description is not None
    assert len(token) < 8 or token[:20] not in error.description
    assert CLAIMS.sub not in error.description
    return error


def _wire(claims: SessionTokenClaims) -> dict[str, Any]:
    members = msgspec.to_builtins(claims)
    return {name: value for name, value in members.items() if value is not None}


def b64_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _forge(header: dict[str, Any] | None = None, **changes: Any) -> str:
    """A token signed with the issuer key but with a changed header or claims."""
    claims = {**_wire(CLAIMS), **changes}
    return sign(
        header or {"alg": "ES256", "typ": "at+jwt", "kid": "iss-1"},
        {k: v for k, v in claims.items() if v is not None},
        ISSUER_KEY,
    )


def test_rfc9068_2_a_minted_token_has_the_access_token_shape() -> None:
    """RFC 9068 §2.1-§2.2: typ at+jwt, ES256, kid; iss, sub, aud, client_id, jti, iat, exp; cnf.jkt."""
    token = mint_session_token(CLAIMS, ISSUER_KEY, "iss-1")
    header_segment, payload_segment, _ = token.split(".")
    header = json.loads(b64_decode(header_segment))
    payload = json.loads(b64_decode(payload_segment))
    assert header == {"alg": "ES256", "typ": "at+jwt", "kid": "iss-1"}
    assert payload == {
        "iss": ISSUER,
        "sub": CLAIMS.sub,
        "aud": ISSUER,
        "client_id": CLIENT_ID,
        "sid": CLAIMS.sid,
        "jti": CLAIMS.jti,
        "iat": NOW,
        "exp": NOW + 3600,
        "cnf": {"jkt": JKT},
        "token_use": "session",
    }


def test_pap_4_2_round_trip() -> None:
    """PAP §4.2: what the issuer mints the sdk verifies to the same claims."""
    verified = _verify(mint_session_token(CLAIMS, ISSUER_KEY, "iss-1"))
    assert verified == CLAIMS
    assert verified.jkt == JKT


def test_pap_4_3_09_a_bearer_mcp_token_is_accepted_only_at_its_server() -> None:
    """PAP-4.3-09/10: aud = resource = the MCP url; accepted there, refused everywhere else."""
    token = mint_session_token(MCP_CLAIMS, ISSUER_KEY, "iss-1")
    verified = _verify(token, audience=MCP_URL)
    assert (verified.resource, verified.cnf, verified.jkt) == (MCP_URL, None, None)
    _refused(token)  # an API or conversation of the company
    _refused(token, audience="https://shop.example/mcp/other")
    _refused(token, audience="https://shop.example/api")


def test_pap_4_3_23_a_dpop_mcp_token_keeps_its_binding() -> None:
    """PAP-4.3-23: a DPoP MCP token carries cnf.jkt; the caller then requires a proof."""
    claims = msgspec.structs.replace(MCP_CLAIMS, cnf=Confirmation(jkt=JKT))
    assert _verify(mint_session_token(claims, ISSUER_KEY, "iss-1"), audience=MCP_URL).jkt == JKT


def test_pap_4_3_10_an_ordinary_token_is_refused_at_an_mcp_server() -> None:
    """PAP-4.3-10/11: a token is valid only where its aud says."""
    _refused(mint_session_token(CLAIMS, ISSUER_KEY, "iss-1"), audience=MCP_URL)


def test_pap_4_3_11_an_ordinary_token_must_be_dpop_bound() -> None:
    """PAP-4.3-11: outside an MCP server every Session Token is DPoP-bound (cnf.jkt)."""
    error = _refused(_forge(cnf=None))
    assert error.description == "session token is not DPoP-bound"
    _refused(_forge(cnf={"jkt": ""}))
    _refused(_forge(cnf={"x5t#S256": "abc"}))


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "ES256", "typ": "JWT", "kid": "iss-1"},
        {"alg": "ES256", "kid": "iss-1"},
        {"alg": "ES256", "typ": "dpop+jwt", "kid": "iss-1"},
        {"alg": "ES384", "typ": "at+jwt", "kid": "iss-1"},
        {"alg": "ES256", "typ": "at+jwt"},
        {"alg": "ES256", "typ": "at+jwt", "kid": 1},
        {"alg": "ES256", "typ": "at+jwt", "kid": "iss-1", "jwk": {"kty": "EC"}},
    ],
)
def test_rfc9068_4_the_header_is_checked(header: dict[str, Any]) -> None:
    """RFC 9068 §4: typ at+jwt, the issuer's alg and kid; no embedded key."""
    _refused(_forge(header))


def test_rfc9068_4_application_at_jwt_is_the_same_type() -> None:
    """RFC 9068 §4: "at+jwt" or "application/at+jwt"."""
    assert _verify(_forge({"alg": "ES256", "typ": "application/at+jwt", "kid": "iss-1"}))


def test_guide_jwt_02_alg_none_and_hmac_are_refused() -> None:
    """GUIDE-jwt-02: never none, never HS256 keyed with the public key."""
    _refused(unsigned({"typ": "at+jwt", "kid": "iss-1"}, _wire(CLAIMS)))
    _refused(hs256_with_public_key({"typ": "at+jwt", "kid": "iss-1"}, _wire(CLAIMS), public(ISSUER_KEY)))


def test_a_token_signed_by_another_key_is_refused() -> None:
    """RFC 9068 §4: the signature verifies with the issuer's key of that kid."""
    forged = mint_session_token(CLAIMS, ec_key("iss-1"), "iss-1")
    assert _refused(forged).description == "session token signature is invalid"


def test_guide_keys_02_an_unknown_kid_is_signalled_for_a_refetch() -> None:
    """After the issuer rotates its key the sdk refetches the JWKS once (GUIDE-keys-02)."""
    rotated = ec_key("iss-2")
    token = mint_session_token(CLAIMS, rotated, "iss-2")
    assert isinstance(_refused(token), UnknownKeyId)
    assert _verify(token, public_set(ISSUER_KEY, rotated)) == CLAIMS


def test_rfc9068_4_iss_must_be_this_issuer() -> None:
    """RFC 9068 §4: another tenant's issuer (same provider host) is refused (GUIDE-co-hosting-01)."""
    other = msgspec.structs.replace(
        CLAIMS, iss="https://auth.frontdoor.example/shop-b", aud="https://auth.frontdoor.example/shop-b"
    )
    _refused(mint_session_token(other, ISSUER_KEY, "iss-1"))


def test_rfc9068_4_aud_must_be_the_issuer() -> None:
    """RFC 9068 §4: aud is checked; an array is not a Session Token."""
    _refused(_forge(aud="https://other.example"))
    _refused(_forge(aud=[ISSUER]))


def test_rfc9068_4_expired_tokens_are_refused() -> None:
    """RFC 9068 §4: exp, with a small skew."""
    token = mint_session_token(CLAIMS, ISSUER_KEY, "iss-1")
    assert _verify(token, now=NOW + 3600 + 59)
    assert _refused(token, now=NOW + 3600 + 60).description == "session token has expired"
    assert _refused(token, now=NOW - 61).description == "session token is issued in the future"
    _refused(_forge(exp=NOW, iat=NOW))


@pytest.mark.parametrize(
    "changes",
    [
        {"token_use": None},
        {"token_use": "account"},
        {"token_use": "SESSION"},
        {"sid": None},
        {"client_id": None},
        {"sub": 7},
        {"exp": "later"},
        {"iat": 1.5},
    ],
)
def test_only_session_tokens_of_the_right_shape_are_accepted(changes: dict[str, Any]) -> None:
    """token_use is "session" (no other token the issuer signs passes) and every claim is typed."""
    _refused(_forge(**changes))


def test_unknown_claims_are_ignored() -> None:
    """RFC 7519 §4: claims not understood are ignored, so a newer issuer does not break an older sdk."""
    assert _verify(_forge(scope="poppy:read", acr="x")) == CLAIMS


@pytest.mark.parametrize("value", ["", "a.b", "a.b.c", segment({"alg": "ES256"}) + ".e30." + b64(b"x" * 64)])
def test_malformed_tokens_are_refused(value: str) -> None:
    """RFC 6750 §3.1: a malformed token is invalid_token."""
    _refused(value)


@pytest.mark.parametrize(
    "changes",
    [
        {"aud": MCP_URL},  # ordinary token with another aud
        {"cnf": None},  # ordinary token not DPoP-bound
        {"resource": ISSUER},  # resource-bound to the issuer
        {"resource": MCP_URL},  # resource without aud = resource
        {"exp": NOW},
        {"exp": NOW + MAX_SESSION_TOKEN_LIFETIME + 1},  # PAP-4.2-04: hours, not days
        {"sid": ""},
        {"sub": "has space"},
        {"cnf": Confirmation(jkt="")},
    ],
)
def test_pap_4_2_04_mint_refuses_inconsistent_claims(changes: dict[str, Any]) -> None:
    """Minting refuses what verification would refuse, and lifetimes of days (PAP-4.2-04)."""
    with pytest.raises(ValueError):
        mint_session_token(msgspec.structs.replace(CLAIMS, **changes), ISSUER_KEY, "iss-1")


def test_mint_needs_a_private_p256_key() -> None:
    """The issuer signs with ES256 only."""
    for key in (public(ISSUER_KEY), ec_key("x", "P-384"), rsa_key()):
        with pytest.raises(ValueError):
            mint_session_token(CLAIMS, key, "iss-1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mint_session_token(CLAIMS, ISSUER_KEY, "")
