"""Which key may verify which alg (PAP-4.3-20, GUIDE-jwt-01..03, RFC 8725 §3.1)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import ASYMMETRIC_JWS_ALGORITHMS, CompactJWS, parse_compact_jws
from frontdoor_protocol.jws_verification import (
    ALGORITHM_KEY_TYPES,
    KeyProblem,
    allowed_algorithms,
    key_fits_algorithm,
    select_verification_keys,
    signature_verifies,
)
from joserfc.jwk import Key, KeySet, OctKey

from .jose_helpers import ec_key, okp_key, public, rsa_key, sign


def test_every_asymmetric_algorithm_has_a_key_rule() -> None:
    """The allowed list and the key table are the same set: nothing allowed without a key rule."""
    assert set(ALGORITHM_KEY_TYPES) == ASYMMETRIC_JWS_ALGORITHMS


@pytest.mark.parametrize(
    ("alg", "fits", "misfits"),
    [
        ("ES256", lambda: ec_key(None), lambda: ec_key(None, "P-384")),
        ("ES384", lambda: ec_key(None, "P-384"), lambda: ec_key(None)),
        ("ES512", lambda: ec_key(None, "P-521"), lambda: ec_key(None, "secp256k1")),
        ("RS256", rsa_key, lambda: ec_key(None)),
        ("PS256", rsa_key, okp_key),
        ("EdDSA", okp_key, lambda: rsa_key()),
        ("Ed25519", okp_key, lambda: ec_key(None)),
    ],
)
def test_guide_jwt_02_key_type_and_curve_must_fit(alg: str, fits: object, misfits: object) -> None:
    """GUIDE-jwt-02: the header's alg must fit the key; and the signature then verifies."""
    good: Key = fits()  # type: ignore[operator]
    bad: Key = misfits()  # type: ignore[operator]
    assert key_fits_algorithm(public(good), alg)
    assert not key_fits_algorithm(public(bad), alg)
    jws = parse_compact_jws(sign({"alg": alg}, {"a": 1}, good))
    assert signature_verifies(jws, public(good))
    assert not signature_verifies(jws, public(bad))


def test_guide_jwt_02_symmetric_keys_never_fit() -> None:
    """GUIDE-jwt-02: an oct key fits no allowed alg, and HS256 is not allowed."""
    secret = OctKey.generate_key(256)
    assert not any(key_fits_algorithm(secret, alg) for alg in ALGORITHM_KEY_TYPES)
    assert not key_fits_algorithm(public(ec_key(None)), "HS256")
    with pytest.raises(ValueError):
        allowed_algorithms(["HS256"])
    with pytest.raises(ValueError):
        allowed_algorithms(["none"])


def test_select_verification_keys() -> None:
    """RFC 7515 §4.1.4: by kid, else the single fitting key."""
    a, b, r = public(ec_key("a")), public(ec_key("b")), public(rsa_key("r"))
    keys = KeySet([a, b, r])
    assert select_verification_keys(keys, kid="a", alg="ES256") == (a,)
    assert select_verification_keys(keys, kid="zz", alg="ES256") is KeyProblem.UNKNOWN_KID
    assert select_verification_keys(keys, kid="r", alg="ES256") is KeyProblem.NO_FITTING_KEY
    assert select_verification_keys(keys, kid=None, alg="ES256") is KeyProblem.AMBIGUOUS
    assert select_verification_keys(keys, kid=None, alg="RS256") == (r,)
    assert select_verification_keys(KeySet([a]), kid=None, alg="RS256") is KeyProblem.UNKNOWN_KID


def test_a_malformed_signature_is_false_not_an_exception() -> None:
    """A truncated or empty signature is simply invalid."""
    key = ec_key(None)
    jws = parse_compact_jws(sign({"alg": "ES256"}, {"a": 1}, key))
    for signature in (b"", jws.signature[:10], jws.signature + b"\x00"):
        forged = CompactJWS(
            header=jws.header, payload=jws.payload, signing_input=jws.signing_input, signature=signature
        )
        assert not signature_verifies(forged, public(key))
