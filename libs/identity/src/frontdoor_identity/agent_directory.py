"""Resolving a ``client_id`` to its verified metadata and keys, cached (PAP §4.1).

`AgentDirectory` fetches the Client ID Metadata Document at the ``client_id`` URL and the
JWKS at its ``jwks_uri``, both through the SSRF-safe fetcher (PAP-3-10, GUIDE-fetch-01..03),
decodes them as strict JSON (GUIDE-json-01) and validates them. Results are held in memory:

- a resolved client for as long as both documents' caching headers allow, within
  `CacheBounds` (GUIDE-fetch-04);
- a failure for ``bounds.failure`` seconds, so an unreachable or invalid agent named by a
  stream of assertions costs one fetch a minute, not one per request;
- at most ``bounds.max_clients`` clients, least recently used evicted first;
- one fetch in flight per client: concurrent requests wait for the same answer.

An unknown ``kid`` calls `refresh_keys`, which refetches the JWKS at most once per
``bounds.key_refresh_interval`` per client, failed attempts included (GUIDE-keys-02).

The cache is per process and per event loop; agents' documents are public and the same for
every tenant, so one directory serves all tenants.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Final, Protocol, TypeVar

from frontdoor_core.clock import Clock
from frontdoor_core.outbound import FetchError, FetchErrorCode, FetchResult, OutboundPolicy
from frontdoor_protocol import MalformedJSON, loads
from joserfc.jwk import KeySet

from frontdoor_identity.cache_lifetime import CacheBounds, cache_lifetime
from frontdoor_identity.client_metadata import ClientMetadata, check_client_id, url_host, validate_client_metadata
from frontdoor_identity.errors import ClientResolutionError, InvalidClientMetadata, ResolutionReason, Stage
from frontdoor_identity.jwks import parse_jwks

__all__ = ["AgentDirectory", "Fetcher", "ResolvedClient"]

_T = TypeVar("_T")

_C = FetchErrorCode
_FETCH_RULES: Final[Mapping[FetchErrorCode, str]] = {
    _C.BLOCKED_ADDRESS: "PAP-3-10",
    _C.MIXED_ANSWERS: "GUIDE-fetch-03",
    _C.NOT_HTTPS: "PAP-3-05",
    _C.REDIRECT_NOT_HTTPS: "PAP-3-05",
    _C.TOO_MANY_REDIRECTS: "GUIDE-fetch-01",
    _C.TOO_LARGE: "GUIDE-fetch-01",
    _C.TIMEOUT: "GUIDE-fetch-01",
    _C.NOT_JSON: "GUIDE-json-01",
}
"""The requirement each fetch refusal enforces; other failures (DNS, TLS, status) cite none."""


class Fetcher(Protocol):
    """What the directory needs of `frontdoor_core.outbound.SafeFetcher`."""

    @property
    def policy(self) -> OutboundPolicy:
        """The fetch policy; its ``allow_http_loopback`` also relaxes URL validation."""
        ...

    async def fetch(self, url: str, *, accept_json: bool = True) -> FetchResult:
        """GET ``url`` within the policy, raising `FetchError` on any refusal or failure."""
        ...


@dataclass(frozen=True, slots=True)
class ResolvedClient:
    """A personal agent Frontdoor can authenticate.

    Attributes:
        metadata: Its validated Client ID Metadata Document.
        keys: The public signing keys from its ``jwks_uri``.
        expires_at: When the directory fetches the documents again.
    """

    metadata: ClientMetadata
    keys: KeySet
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class _Entry:
    """A cached resolution: a client until its documents expire, or a failure for a while."""

    expires_at: datetime
    client: ResolvedClient | None = None
    error: ClientResolutionError | None = None
    metadata_expires_at: datetime | None = None


class AgentDirectory:
    """Client metadata and keys by ``client_id``, fetched safely and cached within bounds."""

    def __init__(self, fetcher: Fetcher, clock: Clock, *, bounds: CacheBounds | None = None) -> None:
        """Create an empty directory.

        Args:
            fetcher: The outbound client, normally a `SafeFetcher`.
            clock: The time source for every cache decision.
            bounds: Cache lifetimes and sizes; the defaults when None.
        """
        self._fetcher = fetcher
        self._clock = clock
        self._bounds = bounds if bounds is not None else CacheBounds()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._key_refreshes: OrderedDict[str, datetime] = OrderedDict()
        self._client_flights: dict[str, asyncio.Task[ResolvedClient]] = {}
        self._key_flights: dict[str, asyncio.Task[KeySet]] = {}

    @property
    def bounds(self) -> CacheBounds:
        """The cache bounds in force."""
        return self._bounds

    async def get_client(self, client_id: str) -> ResolvedClient:
        """The agent's verified metadata and keys, from the cache or fetched now.

        Args:
            client_id: The ``client_id`` (``iss`` of the client assertion).

        Returns:
            The resolved client.

        Raises:
            ClientResolutionError: The client_id is unusable, a fetch was refused or
                failed (the reason is the `FetchErrorCode`), or a document breaks a rule.
                The token endpoint answers ``invalid_client``.
        """
        entry = self._entries.get(client_id)
        if entry is None:
            # Only a client_id that was never resolved needs its syntax checked: cached
            # entries (successes and failures alike) were checked when they were made.
            check_client_id(client_id, allow_http_loopback=self._fetcher.policy.allow_http_loopback)
        if entry is not None and self._clock() < entry.expires_at:
            self._entries.move_to_end(client_id)
            if entry.error is not None:
                raise entry.error.copy()
            assert entry.client is not None
            return entry.client
        return await self._shared(self._client_flights, client_id, partial(self._resolve, client_id))

    async def refresh_keys(self, client_id: str) -> KeySet | None:
        """Refetch the agent's JWKS because an assertion named a ``kid`` it lacks.

        At most one refetch per ``bounds.key_refresh_interval`` per client, counting
        failed attempts (GUIDE-keys-02); concurrent callers share one fetch.

        Args:
            client_id: The agent whose keys to refetch.

        Returns:
            The new key set (also cached), or None when a refetch happened too recently:
            the caller refuses the assertion.

        Raises:
            ClientResolutionError: The client_id is unusable, or the refetch failed; the
                previously cached keys are kept.
        """
        check_client_id(client_id, allow_http_loopback=self._fetcher.policy.allow_http_loopback)
        if client_id not in self._key_flights:  # else join the refetch under way
            now = self._clock()
            last = self._key_refreshes.get(client_id)
            if last is not None and now - last < timedelta(seconds=self._bounds.key_refresh_interval):
                return None
            self._remember_refresh(client_id, now)
        return await self._shared(self._key_flights, client_id, partial(self._refresh, client_id))

    async def _resolve(self, client_id: str) -> ResolvedClient:
        started = self._clock()
        try:
            metadata, metadata_ttl = await self._fetch_metadata(client_id, started)
            keys, keys_ttl = await self._fetch_keys(metadata, started)
        except ClientResolutionError as error:
            self._store(client_id, _Entry(expires_at=started + timedelta(seconds=self._bounds.failure), error=error))
            raise
        metadata_expires_at = started + metadata_ttl
        client = ResolvedClient(metadata=metadata, keys=keys, expires_at=min(metadata_expires_at, started + keys_ttl))
        self._store(client_id, _Entry(client.expires_at, client=client, metadata_expires_at=metadata_expires_at))
        return client

    async def _refresh(self, client_id: str) -> KeySet:
        started = self._clock()
        entry = self._entries.get(client_id)
        if entry is None or entry.client is None or started >= entry.expires_at:
            # Nothing usable cached: a full resolution fetches the JWKS anyway.
            client = await self._shared(self._client_flights, client_id, partial(self._resolve, client_id))
            return client.keys
        keys, keys_ttl = await self._fetch_keys(entry.client.metadata, started)
        current = self._entries.get(client_id)
        if current is not None and current.client is not None and current.metadata_expires_at is not None:
            # The metadata keeps its own lifetime; only the keys are new.
            expires_at = min(current.metadata_expires_at, started + keys_ttl)
            client = ResolvedClient(metadata=current.client.metadata, keys=keys, expires_at=expires_at)
            self._store(client_id, _Entry(expires_at, client=client, metadata_expires_at=current.metadata_expires_at))
        return keys

    async def _fetch_metadata(self, client_id: str, now: datetime) -> tuple[ClientMetadata, timedelta]:
        doc, result = await self._fetch_json(client_id, "client_metadata")
        if len(result.redirect_chain) != 1:
            # The document must come from the client_id URL itself (PAP-4.1-02).
            raise InvalidClientMetadata(
                ResolutionReason.CLIENT_ID_REDIRECTED, "client_metadata", requirement="PAP-4.1-02"
            )
        metadata = validate_client_metadata(
            doc, client_id, allow_http_loopback=self._fetcher.policy.allow_http_loopback
        )
        return metadata, cache_lifetime(result.headers, now=now, bounds=self._bounds)

    async def _fetch_keys(self, metadata: ClientMetadata, now: datetime) -> tuple[KeySet, timedelta]:
        doc, result = await self._fetch_json(metadata.jwks_uri, "jwks")
        host = url_host(metadata.client_id)
        if any(url_host(hop) != host for hop in result.redirect_chain):
            # A redirect may not carry the keys to another domain (PAP-4.1-03).
            raise InvalidClientMetadata(ResolutionReason.JWKS_URI_OTHER_DOMAIN, "jwks", requirement="PAP-4.1-03")
        return parse_jwks(doc), cache_lifetime(result.headers, now=now, bounds=self._bounds)

    async def _fetch_json(self, url: str, stage: Stage) -> tuple[object, FetchResult]:
        try:
            result = await self._fetcher.fetch(url, accept_json=True)
        except FetchError as error:
            raise ClientResolutionError(error.code, stage, requirement=_FETCH_RULES.get(error.code)) from None
        try:
            return loads(result.body), result
        except MalformedJSON as error:
            reason = (
                ResolutionReason.DUPLICATE_MEMBER
                if error.reason == "duplicate_member"
                else ResolutionReason.MALFORMED_JSON
            )
            raise InvalidClientMetadata(reason, stage, requirement="GUIDE-json-01") from None

    def _store(self, client_id: str, entry: _Entry) -> None:
        self._entries[client_id] = entry
        self._entries.move_to_end(client_id)
        while len(self._entries) > self._bounds.max_clients:
            self._entries.popitem(last=False)

    def _remember_refresh(self, client_id: str, now: datetime) -> None:
        self._key_refreshes[client_id] = now
        self._key_refreshes.move_to_end(client_id)
        while len(self._key_refreshes) > self._bounds.max_clients:
            self._key_refreshes.popitem(last=False)

    async def _shared(
        self,
        flights: dict[str, asyncio.Task[_T]],
        key: str,
        work: Callable[[], Coroutine[Any, Any, _T]],
    ) -> _T:
        """Run ``work`` once for every concurrent caller with the same ``key``.

        The task is shielded: a caller that is cancelled does not cancel the fetch the
        others wait for, and its result is still cached.
        """
        task = flights.get(key)
        if task is None:
            task = asyncio.create_task(work())
            flights[key] = task
            task.add_done_callback(partial(_landed, flights, key))
        try:
            return await asyncio.shield(task)
        except ClientResolutionError as error:
            # Each caller raises its own instance: one shared exception would collect
            # every caller's traceback.
            raise error.copy() from None


def _landed(flights: dict[str, asyncio.Task[_T]], key: str, task: asyncio.Task[_T]) -> None:
    if flights.get(key) is task:
        del flights[key]
    if not task.cancelled():
        task.exception()  # retrieved here, so a flight nobody awaited any more logs nothing
