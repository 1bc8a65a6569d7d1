"""JWK thumbprints (RFC 7638), the ``jkt`` a DPoP-bound token is bound to (RFC 9449 §6).

The thumbprint is the base64url SHA-256 of the key's required public members only, as
JSON with the member names in lexicographic order and no whitespace (RFC 7638 §3.2,
§3.3). Optional members (``kid``, ``use``, ``alg``) do not change it, so the same key
always has the same thumbprint whatever metadata travels with it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from frontdoor_protocol.base64url import b64url_encode

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
            required member is missing, empty or not a string.
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
        members[name] = value
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return b64url_encode(hashlib.sha256(canonical.encode("utf-8")).digest())
