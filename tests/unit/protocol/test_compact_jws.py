"""Strict compact JWS parsing (RFC 7515 §3.1, §7.1) and base64url (RFC 7515 §2)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import MalformedJWS, b64url_decode, b64url_encode, parse_compact_jws

from .jose_helpers import b64, segment

_DUPLICATE_ALG = b'{"alg":"ES256","alg":"none"}'


def test_round_trip() -> None:
    """Unpadded base64url both ways."""
    for data in (b"", b"f", b"fo", b"foo", bytes(range(256))):
        assert b64url_decode(b64url_encode(data)) == data
        assert "=" not in b64url_encode(data)


@pytest.mark.parametrize("text", ["Zg==", "Zm9v\n", "Zm+v", "Zm/v", "Z", "Zh", "Zm9 v"])
def test_rfc7515_2_only_canonical_base64url_decodes(text: str) -> None:
    """RFC 7515 §2: no padding, no whitespace, URL-safe alphabet, zero unused bits ("Zh" != "Zg")."""
    with pytest.raises(ValueError):
        b64url_decode(text)


def test_a_valid_jws_is_split_once() -> None:
    """The header is decoded, the payload kept as bytes, the signing input is the first two segments."""
    value = f"{segment({'alg': 'ES256', 'kid': 'k'})}.{segment({'sub': 'x'})}.{b64(b'sig')}"
    jws = parse_compact_jws(value)
    assert jws.header == {"alg": "ES256", "kid": "k"}
    assert jws.alg == "ES256"
    assert jws.payload == b'{"sub":"x"}'
    assert jws.claims() == {"sub": "x"}
    assert jws.signing_input == ".".join(value.split(".")[:2]).encode()
    assert jws.signature == b"sig"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "not_string"),
        ("a" * 9000, "too_long"),
        ("a.b", "not_compact"),
        ("a.b.c.d.e", "not_compact"),  # JWE compact serialization
        ("e30=.e30.", "bad_encoding"),
        (f"{b64(b'[1]')}.e30.", "bad_header"),
        (f"{segment({'kid': 'k'})}.e30.", "bad_header"),
        (f"{segment({'alg': 1})}.e30.", "bad_header"),
        (b64(_DUPLICATE_ALG) + ".e30.", "bad_header"),
        (f"{segment({'alg': 'ES256', 'crit': ['b64'], 'b64': False})}.e30.", "critical_header"),
    ],
)
def test_rfc7515_malformed_values_are_refused(value: object, reason: str) -> None:
    """RFC 7515 §7.1 and §4.1.11, GUIDE-json-01: a reason code, never the input."""
    with pytest.raises(MalformedJWS) as raised:
        parse_compact_jws(value)
    assert raised.value.reason == reason


def test_the_payload_must_be_a_strict_json_object() -> None:
    """RFC 7519 §7.2: the claims set is a JSON object; duplicates are refused (GUIDE-json-01)."""
    for payload in (b"[]", b"not json", b'{"a":1,"a":2}', b'{"a":NaN}'):
        jws = parse_compact_jws(f"{segment({'alg': 'ES256'})}.{b64(payload)}.")
        with pytest.raises(MalformedJWS):
            jws.claims()
