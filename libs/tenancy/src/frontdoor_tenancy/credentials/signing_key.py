"""ES256 signing keys of a tenant's issuer.

A tenant's issuer signs its tokens with ECDSA P-256 / SHA-256 (``ES256``, RFC 7518
§3.4). The private key is kept as PKCS#8 PEM bytes, meant to be encrypted with
:class:`~frontdoor_tenancy.credentials.key_encryption.Kek` before it is stored; the
public half is published in the issuer's JWKS. A key's ``kid`` is its RFC 7638 JWK
thumbprint (base64url SHA-256 over the required members ``crv``, ``kty``, ``x``,
``y``), so the ``kid`` is derived from the key and cannot name a different one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc.jwk import ECKey

__all__ = [
    "SIGNING_ALGORITHM",
    "InvalidSigningKey",
    "SigningKeyMaterial",
    "generate_signing_key",
    "load_private_key",
    "public_jwk",
]

SIGNING_ALGORITHM = "ES256"
"""The JWS ``alg`` every issuer signing key is used with."""

_CURVE = "P-256"


class InvalidSigningKey(ValueError):
    """Stored key material is not a P-256 private key. Never carries the material."""


@dataclass(frozen=True, slots=True)
class SigningKeyMaterial:
    """A freshly generated signing key.

    Attributes:
        kid: RFC 7638 thumbprint of the public key.
        private_pem: PKCS#8 PEM of the private key; encrypt before storing. Hidden
            from ``repr``.
        public_jwk: The JWKS entry (``kty``, ``crv``, ``x``, ``y``, ``use``, ``alg``,
            ``kid``).
    """

    kid: str
    private_pem: bytes = field(repr=False)
    public_jwk: dict[str, str]


def generate_signing_key() -> SigningKeyMaterial:
    """Generate a new P-256 key pair for ES256.

    Returns:
        The private key as PEM, with its public JWK and ``kid``.
    """
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
    key = load_private_key(pem)
    jwk = public_jwk(key)
    return SigningKeyMaterial(kid=jwk["kid"], private_pem=pem, public_jwk=jwk)


def load_private_key(material: bytes) -> ECKey:
    """Load stored (decrypted) key material as a joserfc key ready to sign.

    The returned key carries ``kid``, ``use="sig"`` and ``alg="ES256"`` so that
    ``key.kid`` can be put in the JWS header.

    Args:
        material: PKCS#8 PEM bytes as made by :func:`generate_signing_key`.

    Returns:
        The private key.

    Raises:
        InvalidSigningKey: The bytes are not a P-256 private key.
    """
    try:
        private = serialization.load_pem_private_key(material, password=None)
    except (ValueError, TypeError):
        raise InvalidSigningKey("signing key material is not a PEM private key") from None
    if not isinstance(private, ec.EllipticCurvePrivateKey) or not isinstance(private.curve, ec.SECP256R1):
        raise InvalidSigningKey("signing key material is not a P-256 private key")
    key = ECKey.import_key(private)
    return ECKey.import_key(private, parameters={"kid": key.thumbprint(), "use": "sig", "alg": SIGNING_ALGORITHM})


def public_jwk(key: ECKey) -> dict[str, str]:
    """Return the public JWK to publish in the JWKS.

    Args:
        key: A P-256 key, private or public.

    Returns:
        A new dict with ``kty``, ``crv``, ``x``, ``y``, ``use="sig"``,
        ``alg="ES256"`` and ``kid`` (the RFC 7638 thumbprint). Never private members.

    Raises:
        InvalidSigningKey: The key is not on P-256.
    """
    members = key.as_dict(private=False)
    if members.get("crv") != _CURVE:
        raise InvalidSigningKey("signing key is not on P-256")
    return {
        "kty": "EC",
        "crv": _CURVE,
        "x": str(members["x"]),
        "y": str(members["y"]),
        "use": "sig",
        "alg": SIGNING_ALGORITHM,
        "kid": key.thumbprint(),
    }
