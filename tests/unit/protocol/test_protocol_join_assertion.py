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
