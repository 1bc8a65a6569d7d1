"""An agent's published signing keys: which entries of its JWKS Frontdoor verifies with.

Only public, asymmetric signing keys are kept (GUIDE-jwt-02, GUIDE-jwt-03). A set that
carries any private or symmetric key material is refused whole: a publisher that leaks
its private key cannot be told apart from whoever else now holds it. Entries Frontdoor
cannot use (encryption keys, unknown key types or curves, RSA under 2048 bits, keys that
do not parse) are skipped, as unknown things are ignored (PAP-3.3-03); a set left with
no key is refused.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final, cast

from frontdoor_protocol import is_asymmetric_algorithm
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry, KeySet, OKPKey, RSAKey

from frontdoor_identity.errors import InvalidClientMetadata, ResolutionReason

__all__ = ["MAX_KEYS", "parse_jwks"]

MAX_KEYS: Final = 32
"""Most keys a JWKS may hold; rotation needs two or three."""

_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_SIGNING_CURVES: Final = {"EC": frozenset({"P-256", "P-384", "P-521"}), "OKP": frozenset({"Ed25519", "Ed448"})}
_MIN_RSA_BITS: Final = 2048


def _refuse(reason: ResolutionReason) -> InvalidClientMetadata:
    return InvalidClientMetadata(reason, "jwks", requirement="GUIDE-jwt-03")


def _rsa_bits(modulus: object) -> int:
    if not isinstance(modulus, str):
        return 0
    try:
        raw = base64.urlsafe_b64decode(modulus + "=" * (-len(modulus) % 4))
    except (binascii.Error, ValueError):
        return 0
    return int.from_bytes(raw, "big").bit_length()


def _usable(entry: dict[str, Any]) -> ECKey | RSAKey | OKPKey | None:
    kty = entry.get("kty")
    if kty not in ("EC", "RSA", "OKP"):
        return None
    if entry.get("use", "sig") != "sig":
        return None
    ops = entry.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        return None
    if "alg" in entry and not is_asymmetric_algorithm(entry["alg"]):
        return None
    if kty in _SIGNING_CURVES and entry.get("crv") not in _SIGNING_CURVES[kty]:
        return None
    if kty == "RSA" and _rsa_bits(entry.get("n")) < _MIN_RSA_BITS:
        return None
    try:
        key = JWKRegistry.import_key(cast(dict[str, str | list[str]], entry))
    except (JoseError, ValueError, TypeError, binascii.Error):
        return None
    if not isinstance(key, ECKey | RSAKey | OKPKey) or key.is_private:
        return None
    return key


def parse_jwks(doc: object) -> KeySet:
    """The usable public signing keys of a decoded JWKS document.

    Args:
        doc: The decoded ``jwks_uri`` document.

    Returns:
        A key set of at least one public EC, RSA (2048 bits or more) or OKP signing key.

    Raises:
        InvalidClientMetadata: ``not_object``, ``invalid_field`` (no ``keys`` array, or
            more than `MAX_KEYS`), ``private_key_published`` or ``no_usable_keys``.
    """
    if not isinstance(doc, dict):
        raise _refuse(ResolutionReason.NOT_OBJECT)
    entries = doc.get("keys")
    if not isinstance(entries, list) or len(entries) > MAX_KEYS:
        raise _refuse(ResolutionReason.INVALID_FIELD)
    keys: list[ECKey | RSAKey | OKPKey] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if _PRIVATE_MEMBERS.intersection(entry) or entry.get("kty") == "oct":
            raise _refuse(ResolutionReason.PRIVATE_KEY_PUBLISHED)
        key = _usable(entry)
        if key is not None:
            keys.append(key)
    if not keys:
        raise _refuse(ResolutionReason.NO_USABLE_KEYS)
    return KeySet(list(keys))
