"""The 1.0 join assertion (ADR 0004 §8): minted by the issuer, verified at the company's callback."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from frontdoor_protocol import ProtocolError, UnknownKeyId
from frontdoor_protocol.compact_jws import sign_compact_jws
from frontdoor_protocol.join_assertion import JoinClaims, mint_join_assertion, verify_join_assertion
from joserfc.jwk import ECKey, KeySet

ISSUER = "https://issuer.example/shop"
CALLBACK = "https://shop.example/poppy/join"
NOW = 1_900_000_000
KEY = ECKey.generate_key("P-256", parameters={"kid": "k1"})
KEYS = KeySet([ECKey.import_key(KEY.as_dict(private=False))])


def claims(**over: Any) -> JoinClaims:
    values: dict[str, Any] = {"iss": ISSUER, "aud": CALLBACK, "client_id": "https://agent.example/cimd.json",
                              "sid": "s1", "sub": "u1", "session": "ses_1", "jti": "j1", "iat": NOW, "exp": NOW + 60}
    values.update(over)
    return JoinClaims(**values)


def test_round_trip_guest_and_signed_in() -> None:
    guest = verify_join_assertion(mint_join_assertion(claims(), KEY, "k1"), issuer=ISSUER, audience=CALLBACK,
                                  keys=KEYS, now=NOW + 1)
    assert guest == claims() and guest.account is None
    signed = claims(account="acct", scope="poppy:read", sgn="sgn_1")
    assert verify_join_assertion(mint_join_assertion(signed, KEY, "k1"), issuer=ISSUER, audience=CALLBACK,
                                 keys=KEYS, now=NOW) == signed


@pytest.mark.parametrize(("issuer", "audience", "now"), [
    ("https://issuer.example/other", CALLBACK, NOW), (ISSUER, "https://shop.example/other", NOW),
    (ISSUER, CALLBACK, NOW + 60), (ISSUER, CALLBACK, NOW - 120),
])
def test_another_issuer_callback_or_time_is_refused(issuer: str, audience: str, now: int) -> None:
    with pytest.raises(ProtocolError) as caught:
        verify_join_assertion(mint_join_assertion(claims(), KEY, "k1"), issuer=issuer, audience=audience,
                              keys=KEYS, now=now)
    assert caught.value.code.value == "invalid_grant"


def test_other_tokens_of_the_issuer_and_unknown_keys_are_refused() -> None:
    body = msgspec.structs.asdict(claims())
    access_like = sign_compact_jws({"alg": "ES256", "typ": "at+jwt", "kid": "k1"}, body, KEY)
    with pytest.raises(ProtocolError):
        verify_join_assertion(access_like, issuer=ISSUER, audience=CALLBACK, keys=KEYS, now=NOW)
    with pytest.raises(UnknownKeyId):
        verify_join_assertion(mint_join_assertion(claims(), KEY, "k2"), issuer=ISSUER, audience=CALLBACK,
                              keys=KEYS, now=NOW)
    long_lived = sign_compact_jws({"alg": "ES256", "typ": "poppy-join+jwt", "kid": "k1"},
                                  {**body, "exp": NOW + 3600}, KEY)
    with pytest.raises(ProtocolError):
        verify_join_assertion(long_lived, issuer=ISSUER, audience=CALLBACK, keys=KEYS, now=NOW)
    with pytest.raises(ValueError):
        mint_join_assertion(claims(account="acct"), KEY, "k1")  # an account without its sgn


def _signed(header: dict[str, Any] | None = None, key: ECKey = KEY, **over: Any) -> str:
    body = {**msgspec.structs.asdict(claims()), **over}
    head = {"alg": "ES256", "typ": "poppy-join+jwt", "kid": "k1", **(header or {})}
    return sign_compact_jws({k: v for k, v in head.items() if v is not None},
                            {k: v for k, v in body.items() if v is not None}, key)


def _hs256(body: dict[str, Any]) -> str:
    import base64
    import hashlib
    import hmac
    import json

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing_input = ".".join(b64(json.dumps(part).encode()) for part in
                             ({"alg": "HS256", "typ": "poppy-join+jwt", "kid": "k1"}, body))
    return f"{signing_input}.{b64(hmac.new(b'secret', signing_input.encode(), hashlib.sha256).digest())}"


@pytest.mark.parametrize(("token", "description"), [
    (_signed({"typ": "at+jwt"}), "join assertion typ is not poppy-join+jwt"),
    (_signed({"typ": None}), "join assertion typ is not poppy-join+jwt"),
    (_signed({"kid": None}), "join assertion header is not accepted"),
    (_signed({"jwk": KEY.as_dict(private=False)}), "join assertion header is not accepted"),
    (_hs256({**msgspec.structs.asdict(claims()), "agent_id": None}), "join assertion header is not accepted"),
    (_signed(key=ECKey.generate_key("P-256")), "join assertion signature is invalid"),
    (_signed(sid=None), "join assertion claims are malformed"),
    (_signed(jti=None), "join assertion claims are malformed"),
    (_signed(nbf=NOW), "join assertion claims are malformed"),  # no member beyond JoinClaims
    (_signed(account="acct"), "join assertion claims are malformed"),  # an account without its sgn
    (_signed(iat=NOW - 61, exp=NOW - 1), "join assertion has expired"),
    (_signed(iat=NOW + 61, exp=NOW + 90), "join assertion lifetime is not accepted"),
    (_signed(exp=NOW), "join assertion lifetime is not accepted"),
    (_signed(aud=[CALLBACK]), "join assertion claims are malformed"),  # aud is one string
    (_signed(aud="https://shop.example/other"), "join assertion is for another callback"),
    (_signed(iss="https://issuer.example/other"), "join assertion is from another issuer"),
])
def test_each_refusal_keeps_its_description(token: str, description: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        verify_join_assertion(token, issuer=ISSUER, audience=CALLBACK, keys=KEYS, now=NOW)
    assert (caught.value.code.value, caught.value.description) == ("invalid_grant", description)


def test_alg_none_is_refused() -> None:
    import base64
    import json

    def b64(part: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()

    token = f"{b64({'alg': 'none', 'typ': 'poppy-join+jwt', 'kid': 'k1'})}.{b64(msgspec.structs.asdict(claims()))}."
    with pytest.raises(ProtocolError) as caught:
        verify_join_assertion(token, issuer=ISSUER, audience=CALLBACK, keys=KEYS, now=NOW)
    assert caught.value.code.value == "invalid_grant"
