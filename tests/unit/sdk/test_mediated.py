"""The sdk's relay side of Mediated Sign-In: each refusal, the replay guard, the answers."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from frontdoor_sdk import (
    InMemoryReplayCache,
    RelayRefused,
    RelayRefusedReason,
    relay_code_required,
    relay_complete,
    relay_expired,
    relay_failed,
    verify_relay_request,
)
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey

ISSUER = "https://auth.frontdoor.example/shop-a"
ORIGIN = "https://shop.example"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
KEY = ECKey.generate_key("P-256", parameters={"kid": "k1"})
PUBLIC = KeySet([ECKey.import_key(KEY.as_dict(private=False))])


def claims(**changes: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"iss": ISSUER, "aud": ORIGIN, "iat": T, "exp": T + 60, "jti": "relay-jti-0123456789abcdef",
                         "sub": "usr_1", "client_id": "https://agent.example",
                         "scope": "poppy:read", "fields": {"email": "ada@shop.example", "password": "pw"}}
    c.update(changes)
    return {k: v for k, v in c.items() if v is not None}


def sign(c: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None, key: Any = KEY) -> str:
    h = {"alg": "ES256", "typ": "frontdoor-mediated+jwt", "kid": "k1", **(header or {})}
    return jwt.encode(h, c if c is not None else claims(), key)


async def verify(token: str, **kw: Any) -> Any:
    return await verify_relay_request(token, **{"issuer": ISSUER, "issuer_keys": PUBLIC, "relay_origin": ORIGIN,
                                                "now": NOW, **kw})


async def refused(token: str, **kw: Any) -> RelayRefused:
    with pytest.raises(RelayRefused) as caught:
        await verify(token, **kw)
    return caught.value


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_a_valid_credentials_request() -> None:
    r = await verify(sign(), relay_origin=ORIGIN + "/")
    assert r.fields == {"email": "ada@shop.example", "password": "pw"} and r.scope == "poppy:read"
    assert (r.user_id, r.client_id, r.jti, r.exp, r.is_code) == ("usr_1", "https://agent.example", "relay-jti-0123456789abcdef", T + 60,
                                                                 False)
    assert "pw" not in repr(r)


async def test_a_valid_code_request() -> None:
    r = await verify(sign(claims(fields=None, scope=None, sign_in_id="c-1", code="482913")))
    assert r.is_code and r.sign_in_id == "c-1" and r.code == "482913" and "482913" not in repr(r)


@pytest.mark.parametrize(("header", "reason"), [
    ({"typ": "JWT"}, RelayRefusedReason.WRONG_TYPE),
    ({"typ": None}, RelayRefusedReason.WRONG_TYPE),
    ({"jwk": {"kty": "EC"}}, RelayRefusedReason.EMBEDDED_KEY),
    ({"jku": "https://evil.example/jwks"}, RelayRefusedReason.EMBEDDED_KEY),
    ({"kid": "other"}, RelayRefusedReason.UNKNOWN_KEY),
])
async def test_header_refusals(header: dict[str, Any], reason: RelayRefusedReason) -> None:
    h = {k: v for k, v in {"alg": "ES256", "typ": "frontdoor-mediated+jwt", "kid": "k1", **header}.items()
         if v is not None}
    token = jwt.encode(h, claims(), KEY)
    assert (await refused(token)).reason is reason


async def test_other_algorithms_and_none_are_refused() -> None:
    hs = jwt.encode({"alg": "HS256", "typ": "frontdoor-mediated+jwt"}, claims(), OctKey.generate_key(256))
    assert (await refused(hs)).reason is RelayRefusedReason.ALGORITHM_NOT_ACCEPTED
    none = f"{_b64({'alg': 'none', 'typ': 'frontdoor-mediated+jwt'})}.{_b64(claims())}."
    assert (await refused(none)).reason in (RelayRefusedReason.ALGORITHM_NOT_ACCEPTED, RelayRefusedReason.MALFORMED)


async def test_malformed_and_forged() -> None:
    assert (await refused("not-a-jwt")).reason is RelayRefusedReason.MALFORMED
    forger = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    assert (await refused(sign(key=forger))).reason is RelayRefusedReason.BAD_SIGNATURE


@pytest.mark.parametrize(("changes", "reason"), [
    ({"iss": "https://auth.frontdoor.example/shop-b"}, RelayRefusedReason.WRONG_ISSUER),
    ({"iss": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"aud": "https://other.example"}, RelayRefusedReason.WRONG_AUDIENCE),
    ({"aud": [ORIGIN]}, RelayRefusedReason.WRONG_AUDIENCE),
    ({"aud": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"exp": T + 600}, RelayRefusedReason.LIFETIME_TOO_LONG),
    ({"exp": T}, RelayRefusedReason.LIFETIME_TOO_LONG),
    ({"iat": T - 200, "exp": T - 140}, RelayRefusedReason.EXPIRED),
    ({"iat": T + 200, "exp": T + 260}, RelayRefusedReason.NOT_YET_VALID),
    ({"exp": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"jti": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"jti": ""}, RelayRefusedReason.INVALID_CLAIM),
    ({"sub": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"client_id": 7}, RelayRefusedReason.INVALID_CLAIM),
    ({"fields": {"email": 1}}, RelayRefusedReason.INVALID_CLAIM),
    ({"fields": {}}, RelayRefusedReason.INVALID_CLAIM),
    ({"fields": None, "scope": None}, RelayRefusedReason.MISSING_CLAIM),
    ({"code": "1"}, RelayRefusedReason.INVALID_CLAIM),
    ({"fields": None, "sign_in_id": "c-1"}, RelayRefusedReason.MISSING_CLAIM),
])
async def test_claim_refusals(changes: dict[str, Any], reason: RelayRefusedReason) -> None:
    error = await refused(sign(claims(**changes)))
    assert error.reason is reason
    assert "pw" not in str(error) and "ada@" not in str(error)


async def test_a_jti_is_accepted_once() -> None:
    cache = InMemoryReplayCache(clock=lambda: NOW)
    token = sign()
    await verify(token, replay_cache=cache)
    assert (await refused(token, replay_cache=cache)).reason is RelayRefusedReason.REPLAYED
    later = NOW + timedelta(seconds=10)
    assert (await refused(token, replay_cache=cache, now=later)).reason is RelayRefusedReason.REPLAYED


async def test_a_key_source_refetches_once_for_an_unknown_kid() -> None:
    class Source:
        def __init__(self) -> None:
            self.refreshed = 0

        async def keys(self) -> KeySet:
            return KeySet([])

        async def refresh_for_unknown_kid(self) -> KeySet | None:
            self.refreshed += 1
            return PUBLIC

    source = Source()
    assert (await verify(sign(), issuer_keys=source)).jti == "relay-jti-0123456789abcdef" and source.refreshed == 1


async def test_bad_parameters() -> None:
    with pytest.raises(ValueError, match="origin"):
        await verify(sign(), relay_origin="https://shop.example/pap/relay")
    with pytest.raises(ValueError, match="skew"):
        await verify(sign(), skew=-1)


def test_answers() -> None:
    assert relay_complete("acct_ada") == {"status": "complete", "account": "acct_ada"}
    assert relay_failed() == {"status": "failed"} and relay_expired() == {"status": "expired"}
    assert relay_code_required("c-1") == {"status": "code_required", "sign_in_id": "c-1"}
    assert relay_code_required("c-1", sent_to="a***@x") == {"status": "code_required", "sign_in_id": "c-1",
                                                             "sent_to": "a***@x"}
    for bad in ("", "a" * 256, "with space"):
        with pytest.raises(ValueError):
            relay_complete(bad)
    with pytest.raises(ValueError):
        relay_code_required("")
    with pytest.raises(ValueError):
        relay_code_required("c-1", sent_to="x" * 101)
