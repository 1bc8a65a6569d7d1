"""The issuer's signing keys, fetched from ``{issuer}/jwks.json`` and cached.

Fetched on first use and again after ``max_age`` (so retired keys stop verifying). A token
naming an unknown ``kid`` triggers one refetch, at most once per ``min_refresh`` seconds
(GUIDE-keys-02), so a flood of forged ``kid`` values cannot hammer the issuer. Concurrent
requests share one fetch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import httpx
import msgspec
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry, Key, KeySet

from frontdoor_sdk.clock import Clock, epoch_seconds

__all__ = ["JwksCache", "JwksUnavailable"]

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_BYTES: Final = 256 * 1024
_FIRST_FETCH_RETRY: Final = 1.0
"""Seconds between attempts while no key was ever fetched."""
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


class JwksUnavailable(Exception):
    """The keys could not be fetched (network, status, or not a JWKS): fail closed."""


class _Jwks(msgspec.Struct):
    keys: list[dict[str, Any]]


def _parse(content: bytes) -> KeySet:
    try:
        document = msgspec.json.decode(content, type=_Jwks)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise JwksUnavailable("the issuer's JWKS is not a JSON Web Key Set") from None
    keys: list[Key] = []
    for member in document.keys:
        if not _PRIVATE_MEMBERS.isdisjoint(member):
            continue  # Never trust a private or symmetric key from a key set.
        try:
            keys.append(JWKRegistry.import_key(member))
        except (JoseError, ValueError, TypeError, KeyError):
            continue  # A key type this version does not know: skip it, keep the rest.
    if not keys:
        raise JwksUnavailable("the issuer's JWKS has no usable key")
    return KeySet(keys)


class JwksCache:
    """Caches one issuer's JWKS.

    Args:
        url: The JWKS URL, ``{issuer}/jwks.json``.
        http: The client to fetch with.
        clock: The time source.
        min_refresh: Least seconds between two fetches, except the very first ones.
        max_age: Seconds after which the keys are fetched again on next use.
        timeout: Seconds a fetch may take.
    """

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        clock: Clock,
        *,
        min_refresh: float = 30.0,
        max_age: float = 3600.0,
        timeout: float = 5.0,
    ) -> None:
        self._url = url
        self._http = http
        self._clock = clock
        self._min_refresh = min_refresh
        self._max_age = max_age
        self._timeout = timeout
        self._keys: KeySet | None = None
        self._loaded_at = float("-inf")
        self._attempted_at = float("-inf")
        self._generation = 0
        self._lock = asyncio.Lock()

    async def keys(self) -> KeySet:
        """The cached keys, fetched first if there are none or they are older than ``max_age``.

        Raises:
            JwksUnavailable: When there are no keys and they cannot be fetched.
        """
        now = epoch_seconds(self._clock)
        keys = self._keys
        if keys is not None and now - self._loaded_at < self._max_age:
            return keys
        retry_after = _FIRST_FETCH_RETRY if keys is None else self._min_refresh
        generation = self._generation
        async with self._lock:
            if self._generation != generation and self._keys is not None:
                return self._keys  # Another request fetched meanwhile.
            if epoch_seconds(self._clock) - self._attempted_at < retry_after:
                if self._keys is None:
                    raise JwksUnavailable("the issuer's JWKS could not be fetched a moment ago")
                return self._keys
            try:
                await self._fetch()
            except JwksUnavailable:
                if self._keys is None:
                    raise
                # Stale keys still verify (introspection still guards every Session); the
                # fetch is tried again after min_refresh.
                _LOG.warning("frontdoor_sdk: could not refresh the issuer's JWKS; using the cached keys")
            assert self._keys is not None
            return self._keys

    async def refresh_for_unknown_kid(self) -> KeySet | None:
        """Refetch after a token named an unknown ``kid``, unless one happened recently.

        Returns:
            The fresh keys, or ``None`` when the last fetch is under ``min_refresh`` old
            (the token is then refused with ``invalid_token``).

        Raises:
            JwksUnavailable: When the refetch fails.
        """
        generation = self._generation
        async with self._lock:
            if self._generation != generation:
                return self._keys  # Another request refetched meanwhile.
            if epoch_seconds(self._clock) - self._attempted_at < self._min_refresh:
                return None
            await self._fetch()
            return self._keys

    async def _fetch(self) -> None:
        # Every attempt counts against the throttle: an outage is not retried per request.
        self._attempted_at = epoch_seconds(self._clock)
        try:
            response = await self._http.get(
                self._url, headers={"Accept": "application/json"}, timeout=self._timeout, follow_redirects=False
            )
        except httpx.HTTPError:
            raise JwksUnavailable("the issuer's JWKS could not be fetched") from None
        if response.status_code != 200 or len(response.content) > _MAX_BYTES:
            raise JwksUnavailable(f"the issuer's JWKS answered HTTP {response.status_code}")
        self._keys = _parse(response.content)
        self._loaded_at = epoch_seconds(self._clock)
        self._generation += 1
