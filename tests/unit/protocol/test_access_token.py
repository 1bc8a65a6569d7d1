"""PAP 1.0 access tokens (RFC 9068, ADR 0004 §4): one test per rule, injected ``now``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from frontdoor_protocol import (
    AccessTokenClaims,
    Confirmation,
    ErrorCode,
    ProtocolError,
    SessionTokenClaims,
    UnknownAgentKeyId,
    UnknownKeyId,
    mint_access_token,
    mint_session_token,
    verify_access_token,
    verify_session_token,
)

from .jose_helpers import CLIENT_ID, ISSUER, NOW, ec_key, hs256_with_public_key, jti, sign, unsigned
from .pap10_helpers import ISSUER_KEY, access_token, issuer_keys


def refused(action: Callable[[], Any], description: str, token: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        action()
    error = caught.value
    assert error.code is ErrorCode.INVALID_TOKEN
    assert error.description == description
    for part in token.split("."):
        assert part[:12] not in str(error)
    return error


def verify(token: str, **kwargs: Any) -> AccessTokenClaims:
    return verify_access_token(token, issuer=ISSUER, keys=issuer_keys(), now=kwargs.pop("now", NOW), **kwargs)


def test_rfc_9068_a_valid_access_token_verifies() -> None:
    """ADR 0004 §4, RFC 9068 §2.2: the claims come back as minted."""
    claims = verify(access_token(bound_to="jkt-1"))
    assert (claims.sub, claims.client_id, claims.sgn, claims.scope) == ("acct_42", CLIENT_ID, "sgn_1", "poppy:read")
    assert claims.jkt == "jkt-1" and claims.token_use == "access"


def test_rfc_9068_wrong_typ_is_refused() -> None:
    """RFC 9068 §4: typ must be at+jwt (a plain JWT signed by the issuer is not an access token)."""
    claims = {"iss": ISSUER, "sub": "a", "aud": ISSUER, "client_id": CLIENT_ID, "scope": "", "jti": jti()}
    token = sign({"alg": "ES256", "typ": "JWT", "kid": "issuer-1"}, claims | {"iat": NOW, "exp": NOW + 60}, ISSUER_KEY)
    refused(lambda: verify(token), "access token typ is not at+jwt", token)


def test_adr_0004_s4_a_0_2_session_token_is_not_an_access_token() -> None:
    """ADR 0004 §4: token_use "session" (a 0.2 Session Token) is refused as an access token."""
    session_token = mint_session_token(
        SessionTokenClaims(
            iss=ISSUER,
            sub="usr_1",
            aud=ISSUER,
            client_id=CLIENT_ID,
            sid="ses_1",
            jti=jti(),
            iat=NOW,
            exp=NOW + 600,
            cnf=Confirmation(jkt="jkt-1"),
        ),
        ISSUER_KEY,
        "issuer-1",
    )
    refused(lambda: verify(session_token), "access token claims are not accepted", session_token)


def test_adr_0004_s4_an_access_token_is_not_a_0_2_session_token() -> None:
    """ADR 0004 §4: verify_session_token refuses token_use "access" (neither passes for the other)."""
    token = access_token(bound_to="jkt-1")
    with pytest.raises(ProtocolError) as caught:
        verify_session_token(token, issuer=ISSUER, keys=issuer_keys(), now=NOW)
    assert caught.value.code is ErrorCode.INVALID_TOKEN
    assert caught.value.description == "session token claims are not accepted"


def test_rfc_9068_expired_is_refused() -> None:
    """RFC 9068 §4: an expired token (beyond the 60 s skew) is refused."""
    token = access_token(iat=NOW - 1000, exp=NOW - 61)
    refused(lambda: verify(token), "access token has expired", token)


def test_rfc_9068_other_issuer_is_refused() -> None:
    """RFC 9068 §4: iss must be this tenant's issuer exactly."""
    token = access_token(iss=ISSUER + "/")
    refused(lambda: verify(token), "access token iss is not this issuer", token)


def test_rfc_9068_unknown_issuer_kid_is_plain_unknown_key_id() -> None:
    """ADR 0004 §4: a kid not in the issuer's JWKS is UnknownKeyId (refetch once), not UnknownAgentKeyId."""
    token = access_token(key=ec_key("issuer-2"))
    with pytest.raises(UnknownKeyId) as caught:
        verify(token)
    assert not isinstance(caught.value, UnknownAgentKeyId)
    assert caught.value.code is ErrorCode.INVALID_TOKEN


def test_rfc_9068_audience_defaults_to_the_issuer() -> None:
    """ADR 0004 §4, RFC 8707: aud is the issuer by default; a token for a resource is refused elsewhere."""
    resource = "https://shop.example"
    token = access_token(aud=resource)
    refused(lambda: verify(token), "access token is for another resource", token)
    assert verify(token, audiences=[resource, ISSUER]).aud == resource


def test_rfc_9068_audience_list_needs_one_accepted_entry() -> None:
    """RFC 9068 §4 (RFC 7519 §4.1.3): an aud array is accepted when one entry is an audience here."""
    token = access_token(aud=["https://api.shop.example/mcp", ISSUER])
    assert verify(token).audiences == ("https://api.shop.example/mcp", ISSUER)
    only_other = access_token(aud=["https://api.shop.example/mcp"])
    refused(lambda: verify(only_other), "access token is for another resource", only_other)


def test_adr_0004_s4_minting_refuses_inconsistent_claims() -> None:
    """ADR 0004 §4: the issuer never mints a token without sgn or living over an hour."""
    with pytest.raises(ValueError, match="non-empty"):
        access_token(sgn="")
    with pytest.raises(ValueError, match="1 hour"):
        access_token(exp=NOW + 7200)
    with pytest.raises(ValueError, match="P-256"):
        mint_access_token(
            AccessTokenClaims(
                iss=ISSUER, sub="a", aud=ISSUER, client_id=CLIENT_ID, scope="", jti=jti(), iat=NOW, exp=NOW + 60, sgn="s"
            ),
            ec_key("k", crv="P-384"),
            "k",
        )


def _claims(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"iss": ISSUER, "sub": "acct_42", "aud": ISSUER, "client_id": CLIENT_ID,
                              "scope": "poppy:read", "jti": jti(), "iat": NOW - 5, "exp": NOW + 900, "sgn": "sgn_1",
                              "token_use": "access"}
    values.update(changes)
    return {name: value for name, value in values.items() if value is not None}


_HEADER = {"alg": "ES256", "typ": "at+jwt", "kid": "issuer-1"}


@pytest.mark.parametrize(("token", "description"), [
    (unsigned(_HEADER, _claims()), "access token header is not accepted"),
    (hs256_with_public_key(_HEADER, _claims(), ISSUER_KEY), "access token header is not accepted"),
    (sign({"alg": "ES256", "typ": "at+jwt"}, _claims(), ISSUER_KEY), "access token has no kid"),
    (sign(_HEADER, _claims(), ec_key("issuer-1")), "access token signature is invalid"),
    (sign(_HEADER, _claims(sgn=None), ISSUER_KEY), "access token claims are not accepted"),
    (sign(_HEADER, _claims(exp=None), ISSUER_KEY), "access token claims are not accepted"),
    (sign(_HEADER, _claims(aud=[]), ISSUER_KEY), "access token claims are not accepted"),
    (sign(_HEADER, _claims(iat=NOW + 61, exp=NOW + 900), ISSUER_KEY), "access token is issued in the future"),
    (sign(_HEADER, _claims(iat=NOW - 5, exp=NOW + 3600), ISSUER_KEY), "access token lifetime is not accepted"),
    (sign(_HEADER, _claims(iat=NOW - 1000, exp=NOW - 61), ISSUER_KEY), "access token has expired"),
    (sign(_HEADER, _claims(cnf={"jkt": ""}), ISSUER_KEY), "access token cnf is malformed"),
])
def test_rfc_9068_each_refusal_keeps_its_description(token: str, description: str) -> None:
    """RFC 9068 §4, GUIDE-jwt-02/-04: header, signature, claims and times, each with its own words."""
    refused(lambda: verify(token), description, token.rstrip("."))  # alg none: no empty part to look for
