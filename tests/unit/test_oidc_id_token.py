"""The ID token and logout token checks (OpenID Connect Core §3.1.3.7, Back-Channel Logout §2.6),
pure, at a fixed time, with tokens made here by joserfc."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from frontdoor_sessions.oidc_id_token import (
    LOGOUT_EVENT,
    IdTokenError,
    at_hash,
    verify_id_token,
    verify_logout_token,
)
from frontdoor_sessions.oidc_login import OidcLoginFailed, account_id_from_claims
from joserfc import jws, jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey

NOW = 1_800_000_000
ISS, CLIENT = "https://login.acme.example", "frontdoor"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet([KEY])


def token(claims: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None, key: Any = KEY,
          drop: tuple[str, ...] = ()) -> str:
    base = {"iss": ISS, "aud": CLIENT, "sub": "user-1", "nonce": "n-1", "iat": NOW, "exp": NOW + 300}
    body = {k: v for k, v in {**base, **(claims or {})}.items() if k not in drop}
    return jwt.encode(header or {"alg": "RS256", "kid": "k1"}, body, key)


def check(t: str, **kw: Any) -> dict[str, Any]:
    return verify_id_token(t, keys=KEYS, issuer=ISS, client_id=CLIENT, nonce="n-1", now=NOW, **kw)


def reason(t: str, **kw: Any) -> str:
    with pytest.raises(IdTokenError) as exc:
        check(t, **kw)
    return str(exc.value.reason)


def test_a_good_token_and_at_hash() -> None:
    digest = hashlib.sha256(b"access-1").digest()[:16]
    expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert at_hash("access-1", "RS256") == expected
    assert check(token({"at_hash": expected}), access_token="access-1")["sub"] == "user-1"
    assert reason(token({"at_hash": expected}), access_token="access-2") == "at_hash"


def test_each_claim_is_checked() -> None:
    assert reason(token({"iss": ISS + "/"})) == "issuer"
    assert reason(token({"aud": "other"})) == "audience"
    assert check(token({"aud": [CLIENT, "other"], "azp": CLIENT}))
    assert reason(token({"aud": [CLIENT, "other"]})) == "azp"
    assert reason(token({"azp": "other"})) == "azp"
    assert reason(token({"exp": NOW - 61})) == "expired"
    assert reason(token(drop=("exp",))) == "expired"
    assert reason(token({"iat": NOW + 120})) == "iat"
    assert reason(token({"iat": NOW - 3600})) == "iat"
    assert reason(token({"nonce": "n-2"})) == "nonce"
    assert reason(token(drop=("nonce",))) == "nonce"
    assert reason(token({"sub": ""})) == "subject"


def test_keys_and_algorithms() -> None:
    assert reason(token(key=RSAKey.generate_key(2048, parameters={"kid": "k1"}))) == "signature"
    assert reason(token(header={"alg": "RS256", "kid": "k9"})) == "unknown_key"
    assert check(token(header={"alg": "RS256"}))  # no kid: every published key is tried
    secret = OctKey.generate_key(256)
    assert reason(token(header={"alg": "HS256", "kid": "k1"}, key=secret)) == "algorithm"
    assert reason(token(), algorithms=frozenset({"ES256"})) == "algorithm"  # not what the IdP advertises
    es = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    assert reason(token(header={"alg": "ES256", "kid": "k1"}, key=es)) == "signature"  # k1 is an RSA key
    embedded = token(header={"alg": "RS256", "kid": "k1", "jwk": KEY.as_dict(private=False)})
    assert reason(embedded) == "malformed"
    assert reason("not.a.token") == "malformed"


def test_logout_token() -> None:
    events = {"events": {LOGOUT_EVENT: {}}, "jti": "j-1"}
    logout = {"alg": "RS256", "kid": "k1", "typ": "logout+jwt"}
    t = token(events, drop=("nonce", "exp"), header=logout)
    claims = verify_logout_token(t, keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)
    assert claims["sub"] == "user-1"
    with pytest.raises(IdTokenError):  # an ID token is not a logout token
        verify_logout_token(token(), keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)
    with pytest.raises(IdTokenError):
        verify_logout_token(token({**events, "nonce": "x"}), keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)


def _typed(typ: str | None, claims: dict[str, Any]) -> str:
    header = {"alg": "RS256", "kid": "k1", **({"typ": typ} if typ is not None else {})}
    return jws.serialize_compact(header, json.dumps(claims).encode(), KEY)  # no typ added by a JWT library


LOGOUT = {"iss": ISS, "aud": CLIENT, "sub": "user-1", "iat": NOW, "jti": "j-1", "events": {LOGOUT_EVENT: {}}}


@pytest.mark.parametrize("typ", [None, "JWT", "jwt", "logout+jwt", "Logout+JWT", "application/logout+jwt",
                                 "application/JWT"])
def test_logout_token_types_accepted(typ: str | None) -> None:
    """§2.4: ``logout+jwt`` SHOULD be sent; tokens without it, or with the ``JWT`` older IdPs send, are accepted."""
    assert verify_logout_token(_typed(typ, LOGOUT), keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)["jti"] == "j-1"


@pytest.mark.parametrize("typ", ["at+jwt", "secevent+jwt", "logout", "JOSE", "application/jwt+logout", ""])
def test_logout_token_other_types_refused(typ: Any) -> None:
    with pytest.raises(IdTokenError) as refused:
        verify_logout_token(_typed(typ, LOGOUT), keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)
    assert refused.value.reason == "type"


@pytest.mark.parametrize("typ", [None, "JWT", "logout+jwt"])
def test_an_id_token_never_passes_for_a_logout_token_whatever_its_typ(typ: str | None) -> None:
    """The replay protection is the claims, not ``typ``: no ``events``, or a ``nonce``, is refused."""
    id_token = {"iss": ISS, "aud": CLIENT, "sub": "user-1", "iat": NOW, "exp": NOW + 300, "nonce": "n-1", "jti": "j"}
    for claims in (id_token, {**id_token, "events": {LOGOUT_EVENT: {}}}, {k: v for k, v in LOGOUT.items()
                                                                           if k != "events"}):
        with pytest.raises(IdTokenError) as refused:
            verify_logout_token(_typed(typ, claims), keys=KEYS, issuer=ISS, client_id=CLIENT, now=NOW)
        assert refused.value.reason == "events"


def test_account_claim_mapping() -> None:
    assert account_id_from_claims({"sub": "u-1", "email": "a@b.example"}, "sub") == "u-1"
    assert account_id_from_claims({"sub": "u-1", "email": "a@b.example", "email_verified": True}, "email") == \
        "a@b.example"
    for claims in ({"sub": "u", "email": "a@b.example"}, {"sub": "u", "email": "a@b.example", "email_verified": "true"},
                   {"sub": "u", "email": "ä@b.example", "email_verified": True}, {"sub": "has space"}):
        with pytest.raises(OidcLoginFailed):
            account_id_from_claims(claims, "email" if "email" in claims else "sub")
