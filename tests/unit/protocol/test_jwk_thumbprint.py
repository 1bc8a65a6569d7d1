"""JWK thumbprints (RFC 7638), the cnf.jkt of DPoP-bound tokens (RFC 9449 §6)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import jwk_thumbprint

from .jose_helpers import ec_key, okp_key, public, rsa_key

# RFC 7638 §3.1: the example RSA key and its thumbprint.
_RFC7638_N = (
    "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5"
    "JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNL"
    "yrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
)


def test_rfc7638_3_1_example() -> None:
    """RFC 7638 §3.1: the published thumbprint of the example key; optional members ignored."""
    jwk = {"kty": "RSA", "n": _RFC7638_N, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"}
    assert jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


@pytest.mark.parametrize("make", [lambda: ec_key(None), lambda: ec_key(None, "P-384"), rsa_key, okp_key])
def test_rfc7638_matches_joserfc_for_every_key_type(make: object) -> None:
    """RFC 7638 §3.2 (EC, RSA) and RFC 8037 §2 (OKP): the same value joserfc computes."""
    key = make()  # type: ignore[operator]
    assert jwk_thumbprint(public(key).as_dict()) == public(key).thumbprint()


def test_rfc7638_private_members_do_not_change_it() -> None:
    """RFC 7638 §3.2: only the required public members are hashed."""
    key = ec_key("k", use="sig")
    assert jwk_thumbprint(key.as_dict(private=True)) == jwk_thumbprint(public(key).as_dict())


@pytest.mark.parametrize(
    "jwk",
    [{}, {"kty": "EC", "crv": "P-256", "x": "AA"}, {"kty": "RSA", "n": "", "e": "AQAB"}, {"kty": "XYZ"}, {"kty": 1}],
)
def test_rfc7638_incomplete_keys_are_refused(jwk: dict[str, object]) -> None:
    """RFC 7638 §3.2: every required member must be present."""
    with pytest.raises(ValueError):
        jwk_thumbprint(jwk)


def test_rfc7638_non_ascii_members_are_refused() -> None:
    """Required members are names or base64url (RFC 7518 §6): a non-ASCII one is no key."""
    with pytest.raises(ValueError):
        jwk_thumbprint({"kty": "EC", "crv": "P-256", "x": "é" * 43, "y": "A" * 43})
