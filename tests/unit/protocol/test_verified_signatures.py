"""`VerifiedSignatures`: a Session Token's signature is checked once per key set, and nothing
else is skipped (PAP-4.3-10: every other check of the token runs on every presentation)."""

from __future__ import annotations

from unittest import mock

import msgspec
import pytest
from frontdoor_protocol import ErrorCode, ProtocolError, UnknownKeyId, VerifiedSignatures, mint_session_token
from frontdoor_protocol import session_token as session_token_module

from .jose_helpers import ISSUER, NOW, ec_key, public_set
from .test_session_token import CLAIMS, ISSUER_KEY, KEYS, _verify


def _token(**changes: object) -> str:
    return mint_session_token(msgspec.structs.replace(CLAIMS, **changes), ISSUER_KEY, "iss-1")


def test_the_second_presentation_skips_the_signature_check_only() -> None:
    token, signatures = _token(), VerifiedSignatures()
    first = _verify(token, signatures=signatures)
    with mock.patch.object(session_token_module, "verify_issuer_jws",
                           side_effect=AssertionError("signature checked again")):
        again = _verify(token, signatures=signatures)
    assert again == first and len(signatures) == 1


def test_the_claims_are_still_checked_on_a_remembered_token() -> None:
    token, signatures = _token(), VerifiedSignatures()
    _verify(token, signatures=signatures)
    with pytest.raises(ProtocolError) as expired:  # past exp: refused although remembered
        _verify(token, signatures=signatures, now=NOW + 3600 + 3600)
    assert expired.value.code is ErrorCode.INVALID_TOKEN
    with pytest.raises(ProtocolError):  # another issuer's expectations
        _verify(token, signatures=signatures, issuer=ISSUER + "/other")
    with pytest.raises(ProtocolError):  # at an MCP server it is not for
        _verify(token, signatures=signatures, audience="https://shop.example/mcp")


def test_a_new_key_set_object_verifies_again_and_a_retired_key_fails() -> None:
    token, signatures = _token(), VerifiedSignatures()
    _verify(token, signatures=signatures)
    rotated = public_set(ec_key("iss-2"))  # the JWKS refetched without the old key
    with pytest.raises(UnknownKeyId):
        _verify(token, keys=rotated, signatures=signatures)
    same_keys_new_object = public_set(ISSUER_KEY)
    assert same_keys_new_object is not KEYS
    assert signatures.get(token, same_keys_new_object) is None


def test_a_forged_or_altered_token_is_never_remembered() -> None:
    signatures = VerifiedSignatures()
    token = _token()
    header, payload, signature = token.split(".")
    forged = ".".join((header, payload, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")))
    with pytest.raises(ProtocolError):
        _verify(forged, signatures=signatures)
    assert len(signatures) == 0
    _verify(token, signatures=signatures)
    with pytest.raises(ProtocolError):  # the remembered token's bytes changed: a different digest, verified in full
        _verify(forged, signatures=signatures)
    assert len(signatures) == 1


def test_it_is_bounded_least_recently_used_first() -> None:
    signatures = VerifiedSignatures(max_tokens=2)
    a, b, c = (_token(jti=f"stk_Yk2b0fWq3nQ9Jx1mK7vR0{n}") for n in "ABC")
    _verify(a, signatures=signatures)
    _verify(b, signatures=signatures)
    assert signatures.get(a, KEYS) is not None  # a used last: b is the oldest now
    _verify(c, signatures=signatures)
    assert len(signatures) == 2
    assert signatures.get(b, KEYS) is None and signatures.get(a, KEYS) is not None
    with pytest.raises(ValueError):
        VerifiedSignatures(max_tokens=0)
