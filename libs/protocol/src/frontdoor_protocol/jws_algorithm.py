"""JWS algorithms the protocol lets a signature use.

Assertions and DPoP proofs are verified with public keys only, so only asymmetric
algorithms are ever acceptable: never ``none`` and never an HMAC such as ``HS256``, which
an attacker could "sign" with a public key (PAP-4.3-20, GUIDE-jwt-02). ES256 is the one
every company accepts (PAP-3.2-09).
"""

from __future__ import annotations

from typing import Final

__all__ = ["ASYMMETRIC_JWS_ALGORITHMS", "REQUIRED_DPOP_ALGORITHM", "is_asymmetric_algorithm"]

REQUIRED_DPOP_ALGORITHM: Final = "ES256"
"""Every company accepts DPoP proofs signed with it and lists it (PAP-3.2-09, PAP-3.2-10)."""

ASYMMETRIC_JWS_ALGORITHMS: Final = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA", "Ed25519"}
)
"""The public-key JWS algorithms of RFC 7518 §3.1 and RFC 8037 / RFC 9864."""


def is_asymmetric_algorithm(alg: object) -> bool:
    """Whether ``alg`` names a public-key JWS algorithm (PAP-4.3-20).

    Args:
        alg: A JOSE ``alg`` value or a metadata list element.

    Returns:
        ``False`` for ``none``, HMAC algorithms, unknown names and non-strings.
    """
    return isinstance(alg, str) and alg in ASYMMETRIC_JWS_ALGORITHMS
