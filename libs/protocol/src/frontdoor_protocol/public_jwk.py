"""A public key carried inside a JWT: a DPoP proof's ``jwk`` header, a delegation's ``cnf.jwk``.

Both are JWKs the signer chose (RFC 9449 §4.2, RFC 7800 §3.2), so before use each must be
a JSON object without any private or symmetric member (RFC 7518 §6.2.2, §6.3.2, §6.4;
PAP-4.3-20), import as a key and, for a signature key, fit the ``alg``. The key's RFC 7638
thumbprint is what a token binds to (``cnf.jkt``, PAP-4.3-03).

An agent proves with the same key on every request: importing a JWK and hashing its
thumbprint is a third of a resource check's CPU, so the result is remembered per (exact
members, ``alg``). A pure function of its key, so one process-wide bounded LRU serves
every caller.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry, Key

from frontdoor_protocol.bounded_cache import BoundedLRU
from frontdoor_protocol.jwk_thumbprint import jwk_thumbprint
from frontdoor_protocol.jws_verification import key_fits_algorithm

__all__ = ["PRIVATE_JWK_MEMBERS", "PublicJWKProblem", "import_public_jwk"]

PRIVATE_JWK_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
"""JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4)."""

_KEY_CACHE_MAX: Final = 4096
_KEY_CACHE: Final[BoundedLRU[tuple[tuple[tuple[str, str], ...], str | None], tuple[Key, str]]] = BoundedLRU(
    _KEY_CACHE_MAX
)


class PublicJWKProblem(StrEnum):
    """Why a carried JWK is refused (stable, safe to log)."""

    MISSING = "missing"
    """Not a JSON object."""
    PRIVATE = "private"
    """It has a private or symmetric member."""
    INVALID = "invalid"
    """It does not import as a key."""
    DOES_NOT_FIT = "does_not_fit"
    """It is private after all, or its type or curve does not fit the ``alg``."""


def import_public_jwk(jwk: object, alg: str | None = None) -> tuple[Key, str] | PublicJWKProblem:
    """The key a JWT carries and its RFC 7638 thumbprint, or why it is refused.

    Args:
        jwk: The member as decoded (a JSON object to be accepted).
        alg: The algorithm the key must fit, or ``None`` (the caller checks the type).

    Returns:
        The imported public key and its thumbprint, or the problem.
    """
    if not isinstance(jwk, dict):
        return PublicJWKProblem.MISSING
    if not PRIVATE_JWK_MEMBERS.isdisjoint(jwk):
        return PublicJWKProblem.PRIVATE
    cache_key = None
    if all(isinstance(k, str) and isinstance(v, str) for k, v in jwk.items()):
        cache_key = (tuple(sorted(jwk.items())), alg)
        hit = _KEY_CACHE.get(cache_key)
        if hit is not None:
            return hit
    result = _import(jwk, alg)
    if cache_key is not None and not isinstance(result, PublicJWKProblem):
        _KEY_CACHE.put(cache_key, result)
    return result


def _import(jwk: dict[str, Any], alg: str | None) -> tuple[Key, str] | PublicJWKProblem:
    try:
        key = JWKRegistry.import_key(jwk)
        thumbprint = jwk_thumbprint(jwk)
    except (JoseError, ValueError, TypeError, KeyError):
        return PublicJWKProblem.INVALID
    if key.is_private or (alg is not None and not key_fits_algorithm(key, alg)):
        return PublicJWKProblem.DOES_NOT_FIT
    return key, thumbprint
