"""An agent's identity keys under the PAP 1.0 rules (ADR 0004 §6, [S §3]), cached.

The 1.0 sibling of `AgentDirectory`: a ``Poppy-Session`` delegation is signed by a key
from the agent's Client ID Metadata Document's ``jwks_uri``, and resource servers ask
Frontdoor for those keys (``POST {issuer}/poppy/agent-keys``). The rules differ from 0.2:

- the document is fetched from the exact ``client_id`` URL and **no redirect** is
  accepted, for the document or the JWKS;
- the document's ``client_id`` equals the URL character for character; ``jwks_uri`` is
  HTTPS on the same host;
- signed-out use needs only ``client_id`` and ``jwks_uri`` (no ``client_name``; 0.2's
  `AgentDirectory` keeps its stricter rules);
- a failed load is remembered for ``failure`` seconds (30), so a stream of requests
  naming a broken agent costs one fetch per 30 s;
- an unknown ``kid`` reloads at most once per ``key_refresh_interval`` (30 s) per agent;
- keys that loaded are kept up to ``stale_for`` seconds (1 h) after they loaded while a
  reload fails, so a short outage of the agent's host does not sign out its users.

Everything goes through the SSRF-safe fetcher. The cache is per process; agents'
documents are public and the same for every tenant.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from frontdoor_core.clock import Clock
from frontdoor_core.outbound import FetchError, FetchResult
from frontdoor_protocol import MalformedJSON, loads
from joserfc.jwk import KeySet

from frontdoor_identity.agent_directory import Fetcher
from frontdoor_identity.cache_lifetime import CacheBounds, cache_lifetime
from frontdoor_identity.client_metadata import _url_problem, check_client_id, url_host
from frontdoor_identity.errors import ClientResolutionError, InvalidClientMetadata, ResolutionReason, Stage
from frontdoor_identity.jwks import parse_jwks

__all__ = ["AgentKeys", "DelegatedKeyBounds", "DelegatedKeyDirectory"]

_R = ResolutionReason


@dataclass(frozen=True, slots=True)
class DelegatedKeyBounds:
    """The 1.0 caching knobs, in seconds (ADR 0004 §6)."""

    failure: float = 30.0
    key_refresh_interval: float = 30.0
    stale_for: float = 3600.0
    max_clients: int = 10_000
    cache: CacheBounds = field(default_factory=lambda: CacheBounds(minimum=60.0, maximum=3600.0, default=300.0))


@dataclass(frozen=True, slots=True)
class AgentKeys:
    """An agent's identity keys as last loaded.

    Attributes:
        client_id: The agent (its CIMD URL).
        jwks_uri: Where the keys came from.
        client_name: Its display name when the document has a usable one.
        keys: The public signing keys.
        loaded_at: When they loaded (the stale window counts from here).
        expires_at: When they are loaded again.
    """

    client_id: str
    jwks_uri: str
    client_name: str | None
    keys: KeySet
    loaded_at: datetime
    expires_at: datetime

    def public_jwks(self) -> list[dict[str, Any]]:
        """The keys as public JWKs, for the resource server."""
        return [dict(k.as_dict(private=False)) for k in self.keys.keys]


@dataclass(frozen=True, slots=True)
class _Entry:
    keys: AgentKeys | None
    error: ClientResolutionError | None
    failed_until: datetime | None


def _delegated_metadata(doc: object, client_id: str, *, allow_http_loopback: bool) -> tuple[str, str | None]:
    """``(jwks_uri, client_name)`` of a 1.0 document fetched from exactly ``client_id`` [S §3]."""
    host = url_host(client_id)
    if not isinstance(doc, dict):
        raise InvalidClientMetadata(_R.NOT_OBJECT, "client_metadata")
    if doc.get("client_id") != client_id:
        reason = _R.MISSING_FIELD if "client_id" not in doc else _R.CLIENT_ID_MISMATCH
        raise InvalidClientMetadata(reason, "client_metadata")
    jwks_uri = doc.get("jwks_uri")
    if jwks_uri is None:
        raise InvalidClientMetadata(_R.MISSING_FIELD, "client_metadata")
    if not isinstance(jwks_uri, str) or _url_problem(jwks_uri, allow_http_loopback=allow_http_loopback) is not None:
        raise InvalidClientMetadata(_R.JWKS_URI_NOT_HTTPS, "client_metadata")
    if url_host(jwks_uri) != host:
        raise InvalidClientMetadata(_R.JWKS_URI_OTHER_DOMAIN, "client_metadata")
    name = doc.get("client_name")
    usable_name = name if isinstance(name, str) and name.strip() and len(name) <= 200 and name.isprintable() else None
    return jwks_uri, usable_name


class DelegatedKeyDirectory:
    """Identity keys of 1.0 agents by ``client_id``, loaded safely and cached within bounds."""

    def __init__(self, fetcher: Fetcher, clock: Clock, *, bounds: DelegatedKeyBounds | None = None) -> None:
        self._fetcher = fetcher
        self._clock = clock
        self._bounds = bounds or DelegatedKeyBounds()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._reloads: OrderedDict[str, datetime] = OrderedDict()
        self._flights: dict[str, asyncio.Task[AgentKeys]] = {}

    async def get_keys(self, client_id: str, *, refresh: bool = False) -> AgentKeys:
        """The agent's keys, cached, or loaded now.

        Args:
            client_id: The agent (the Session JWT's unverified ``iss``).
            refresh: The caller met an unknown ``kid``: reload, at most once per
                ``key_refresh_interval`` per agent (else the cached keys are returned).

        Raises:
            ClientResolutionError: The ``client_id`` is unusable, or the keys cannot be
                loaded and none loaded within ``stale_for`` (a fetch failure carries the
                `FetchErrorCode`, a broken document an `InvalidClientMetadata`).
        """
        now = self._clock()
        entry = self._entries.get(client_id)
        if entry is None:
            check_client_id(client_id, allow_http_loopback=self._fetcher.policy.allow_http_loopback)
        else:
            self._entries.move_to_end(client_id)
        if entry is not None and entry.failed_until is not None and now < entry.failed_until:
            if entry.keys is not None and now < entry.keys.loaded_at + timedelta(seconds=self._bounds.stale_for):
                return entry.keys
            assert entry.error is not None
            raise entry.error.copy()
        fresh = entry is not None and entry.keys is not None and now < entry.keys.expires_at
        if fresh and refresh:
            last = self._reloads.get(client_id)
            if last is not None and now - last < timedelta(seconds=self._bounds.key_refresh_interval):
                assert entry is not None and entry.keys is not None
                return entry.keys
            self._remember(self._reloads, client_id, now)
            fresh = False
        if fresh:
            assert entry is not None and entry.keys is not None
            return entry.keys
        task = self._flights.get(client_id)
        if task is None:
            task = asyncio.create_task(self._load(client_id))
            self._flights[client_id] = task
            task.add_done_callback(partial(self._landed, client_id))
        try:
            return await asyncio.shield(task)
        except ClientResolutionError as error:
            raise error.copy() from None

    def _landed(self, client_id: str, task: asyncio.Task[AgentKeys]) -> None:
        if self._flights.get(client_id) is task:
            del self._flights[client_id]
        if not task.cancelled():
            task.exception()

    async def _load(self, client_id: str) -> AgentKeys:
        started = self._clock()
        previous = self._entries.get(client_id)
        try:
            keys = await self._fetch(client_id, started)
        except ClientResolutionError as error:
            kept = previous.keys if previous is not None else None
            self._store(client_id, _Entry(keys=kept, error=error,
                                          failed_until=started + timedelta(seconds=self._bounds.failure)))
            if kept is not None and started < kept.loaded_at + timedelta(seconds=self._bounds.stale_for):
                return kept
            raise
        self._store(client_id, _Entry(keys=keys, error=None, failed_until=None))
        return keys

    async def _fetch(self, client_id: str, now: datetime) -> AgentKeys:
        loopback = self._fetcher.policy.allow_http_loopback
        doc, meta = await self._fetch_json(client_id, "client_metadata")
        if len(meta.redirect_chain) != 1:
            raise InvalidClientMetadata(_R.CLIENT_ID_REDIRECTED, "client_metadata")
        jwks_uri, name = _delegated_metadata(doc, client_id, allow_http_loopback=loopback)
        raw, fetched = await self._fetch_json(jwks_uri, "jwks")
        if len(fetched.redirect_chain) != 1:
            raise InvalidClientMetadata(_R.JWKS_URI_OTHER_DOMAIN, "jwks")
        keys = parse_jwks(raw)
        ttl = min(cache_lifetime(meta.headers, now=now, bounds=self._bounds.cache),
                  cache_lifetime(fetched.headers, now=now, bounds=self._bounds.cache))
        return AgentKeys(client_id=client_id, jwks_uri=jwks_uri, client_name=name, keys=keys, loaded_at=now,
                         expires_at=now + ttl)

    async def _fetch_json(self, url: str, stage: Stage) -> tuple[object, FetchResult]:
        try:
            result = await self._fetcher.fetch(url, accept_json=True)
        except FetchError as error:
            raise ClientResolutionError(error.code, stage) from None
        try:
            return loads(result.body), result
        except MalformedJSON as error:
            reason = _R.DUPLICATE_MEMBER if error.reason == "duplicate_member" else _R.MALFORMED_JSON
            raise InvalidClientMetadata(reason, stage) from None

    def _store(self, client_id: str, entry: _Entry) -> None:
        self._remember(self._entries, client_id, entry)

    def _remember(self, cache: OrderedDict[str, Any], key: str, value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._bounds.max_clients:
            cache.popitem(last=False)
