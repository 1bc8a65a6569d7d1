"""JWK thumbprints (RFC 7638), the ``jkt`` a DPoP-bound token is bound to (RFC 9449 §6).

The thumbprint is the base64url SHA-256 of the key's required public members only, as
JSON with the member names in lexicographic order and no whitespace (RFC 7638 §3.2,
§3.3). Optional members (``kid``, ``use``, ``alg``) do not change it, so the same key
always has the same thumbprint whatever metadata travels with it.

The hashing is joserfc's (:func:`joserfc.jwk.thumbprint`, as ``Key.thumbprint()`` uses);
this module only chooses the required members of a decoded JWK, and refuses a JWK that
lacks one, before any key is imported (a DPoP proof's or a delegation's ``jwk``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from joserfc.jwk import thumbprint as _joserfc_thumbprint

__all__ = ["THUMBPRINT_MEMBERS", "jwk_thumbprint"]

THUMBPRINT_MEMBERS: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "EC": ("crv", "kty", "x", "y"),  # RFC 7638 §3.2
        "RSA": ("e", "kty", "n"),  # RFC 7638 §3.2
        "OKP": ("crv", "kty", "x"),  # RFC 8037 §2
        "oct": ("k", "kty"),  # RFC 7638 §3.2
    }
)
"""The required members hashed for each ``kty``, in lexicographic order."""


def jwk_thumbprint(jwk: Mapping[str, object]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a JWK.

    Args:
        jwk: The key's members as decoded JSON (public or private; private members are
            not hashed).

    Returns:
        43 characters of base64url.

    Raises:
        ValueError: When ``kty`` is not one of ``EC``, ``RSA``, ``OKP``, ``oct`` or a
            required member is missing, empty, not a string or not ASCII (every required
            member is a registered name or base64url, RFC 7518 §6).
    """
    kty = jwk.get("kty")
    names = THUMBPRINT_MEMBERS.get(kty) if isinstance(kty, str) else None
    if names is None:
        raise ValueError("JWK has no supported kty")
    members: dict[str, str] = {}
    for name in names:
        value = jwk.get(name)
        if not isinstance(value, str) or not value:
            raise ValueError("JWK lacks a required member")
        if not value.isascii():
            # joserfc escapes non-ASCII; RFC 7638 §3.3 hashes UTF-8. No valid key has any.
            raise ValueError("JWK member is not ASCII")
        members[name] = value
    return _joserfc_thumbprint(members)
