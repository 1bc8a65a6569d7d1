"""ES256 signing keys: generation, loading, JWKS entries, RFC 7638 kids."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from frontdoor_tenancy.credentials import (
    InvalidSigningKey,
    generate_signing_key,
    load_private_key,
    public_jwk,
)
from joserfc import jws, jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import ECKey, RSAKey

# RFC 7515 Appendix A.3: the published P-256 example key (public half).
RFC7515_EC_X = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
RFC7515_EC_Y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def independent_ec_thumbprint(crv: str, x: str, y: str) -> str:
    # RFC 7638 §3.2: required members only, lexicographic order, no whitespace.
    canonical = '{"crv":"' + crv + '","kty":"EC","x":"' + x + '","y":"' + y + '"}'
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pem_of(private: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def test_generated_key_has_the_jwks_members_and_no_private_ones() -> None:
    material = generate_signing_key()
    jwk = material.public_jwk
    assert set(jwk) == {"kty", "crv", "x", "y", "use", "alg", "kid"}
    assert (jwk["kty"], jwk["crv"], jwk["use"], jwk["alg"]) == ("EC", "P-256", "sig", "ES256")
    assert jwk["kid"] == material.kid
    assert len(b64url_decode(jwk["x"])) == 32
    assert len(b64url_decode(jwk["y"])) == 32
    assert material.private_pem.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_kid_is_the_rfc7638_thumbprint() -> None:
    material = generate_signing_key()
    jwk = material.public_jwk
    assert material.kid == independent_ec_thumbprint("P-256", jwk["x"], jwk["y"])


def test_thumbprint_of_the_rfc7515_example_ec_key() -> None:
    key = ECKey.import_key({"kty": "EC", "crv": "P-256", "x": RFC7515_EC_X, "y": RFC7515_EC_Y})
    expected = independent_ec_thumbprint("P-256", RFC7515_EC_X, RFC7515_EC_Y)
    assert expected == "oKIywvGUpTVTyxMQ3bwIIeQUudfr_CkLMjCE19ECD-U"
    assert public_jwk(key)["kid"] == expected


def test_thumbprint_implementation_matches_rfc7638_published_example() -> None:
    # RFC 7638 §3.1: the only published vector is RSA; it checks the thumbprint code
    # our kids rely on.
    n = (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPeb"
        "WKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQ"
        "MicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2N"
        "cRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    )
    key = RSAKey.import_key({"kty": "RSA", "n": n, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"})
    assert key.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_sign_with_loaded_key_and_verify_with_published_jwk() -> None:
    material = generate_signing_key()
    key = load_private_key(material.private_pem)
    assert key.kid == material.kid
    token = jwt.encode({"alg": "ES256", "kid": key.kid}, {"sub": "agent-1"}, key)
    verifier = ECKey.import_key(dict(material.public_jwk))
    decoded = jwt.decode(token, verifier, algorithms=["ES256"])
    assert decoded.claims == {"sub": "agent-1"}
    assert decoded.header["kid"] == material.kid


def test_signature_verifies_with_cryptography_directly() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    key = load_private_key(pem_of(private))
    compact = jws.serialize_compact({"alg": "ES256"}, b"payload", key)
    header, payload, signature = compact.split(".")
    raw = b64url_decode(signature)
    assert len(raw) == 64
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    private.public_key().verify(der, f"{header}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        private.public_key().verify(der, f"{header}.x".encode(), ec.ECDSA(hashes.SHA256()))


def test_another_key_does_not_verify() -> None:
    signer = load_private_key(generate_signing_key().private_pem)
    other = ECKey.import_key(dict(generate_signing_key().public_jwk))
    compact = jws.serialize_compact({"alg": "ES256"}, b"payload", signer)
    with pytest.raises(BadSignatureError):
        jws.deserialize_compact(compact, other, algorithms=["ES256"])


def test_public_jwk_matches_the_private_key() -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    numbers = private.public_key().public_numbers()
    jwk = public_jwk(load_private_key(pem_of(private)))
    assert int.from_bytes(b64url_decode(jwk["x"]), "big") == numbers.x
    assert int.from_bytes(b64url_decode(jwk["y"]), "big") == numbers.y
    assert "d" not in jwk
    json.dumps(jwk)  # plain JSON-serialisable strings


def test_each_generated_key_is_new() -> None:
    assert generate_signing_key().kid != generate_signing_key().kid


@pytest.mark.parametrize(
    "material",
    [
        b"",
        b"not a pem",
        pem_of(ec.generate_private_key(ec.SECP384R1())),
        pem_of(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    ],
    ids=["empty", "garbage", "p384", "rsa", "public-only"],
)
def test_load_refuses_anything_but_a_p256_private_key(material: bytes) -> None:
    with pytest.raises(InvalidSigningKey):
        load_private_key(material)


def test_public_jwk_refuses_other_curves() -> None:
    with pytest.raises(InvalidSigningKey):
        public_jwk(ECKey.generate_key("P-384"))


def test_repr_hides_the_private_key() -> None:
    material = generate_signing_key()
    assert "PRIVATE" not in repr(material)
    assert material.kid in repr(material)
