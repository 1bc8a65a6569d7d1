"""Agents' identity keys for PAP 1.0, from ``POST {issuer}/poppy/agent-keys``, cached per client.

A ``Poppy-Session`` JWT is vouched for by a delegation the agent's identity key signed
(ADR 0004 §3). Frontdoor loads the agent's Client ID Metadata Document and JWKS through
its SSRF-safe fetcher, applies the tenant's agent policy, and answers the public keys with
a ``max_age`` (ADR 0004 §6); the sdk verifies every signature itself.

The cache is a bounded LRU over ``client_id``: each entry is kept ``max_age`` seconds (as
Frontdoor said, capped at an hour). A delegation naming an unknown ``kid`` asks again with
``"refresh": true``, at most once per ``min_refresh`` seconds per client, so a flood of
forged ``kid`` values cannot hammer Frontdoor (nor, through it, the agent's host).
Concurrent requests for one client share one call. It fails closed: no usable answer is
:class:`AgentKeysUnavailable`, never "allow".
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any, Final

import httpx
import msgspec
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry, Key, KeySet

from frontdoor_sdk._frontdoor_call import Unavailable, decode_answer, post
from frontdoor_sdk.clock import Clock, epoch_seconds

__all__ = ["AgentKeys", "AgentKeysCache", "AgentKeysRefused", "AgentKeysUnavailable", "AgentRefused"]

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_BYTES: Final = 256 * 1024
_MAX_AGE_CAP: Final = 3600.0
_DEFAULT_MAX_CLIENTS: Final = 1000
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


class AgentKeysUnavailable(Unavailable):
    """Frontdoor gave no usable answer (network, 429, 5xx, malformed): answer 503.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """


class AgentRefused(Exception):
    """Frontdoor refused the agent (``403 invalid_client``): its policy, or a bad document."""


class AgentKeysRefused(Exception):
    """Frontdoor refused the resource-server credential: a configuration error (500)."""


class _Answer(msgspec.Struct, frozen=True):
    client_id: str
    keys: list[dict[str, Any]]
    max_age: float = 300


class _Error(msgspec.Struct, frozen=True):
    error: str = ""


class AgentKeys(msgspec.Struct, frozen=True, kw_only=True):
    """One client's identity keys as cached.

    Attributes:
        keys: The public keys the client's delegations may be signed with.
        fetched_at: When Frontdoor answered, seconds since the epoch.
        expires_at: When to ask again.
    """

    keys: KeySet
    fetched_at: float
    expires_at: float


def _key_set(members: list[dict[str, Any]]) -> KeySet:
    keys: list[Key] = []
    for member in members:
        if not _PRIVATE_MEMBERS.isdisjoint(member):
            continue  # Never trust a private or symmetric key from a key set.
        try:
            keys.append(JWKRegistry.import_key(member))
        except (JoseError, ValueError, TypeError, KeyError):
            continue  # A key type this version does not know: the others still verify.
    return KeySet(keys)


class AgentKeysCache:
    """Asks Frontdoor for agents' identity keys and remembers them.

    Args:
        url: ``{issuer}/poppy/agent-keys``.
        credential: The resource-server credential (``fdrs_...``).
        http: The client to ask with.
        clock: The time source.
        min_refresh: Least seconds between two asks for one client after an unknown ``kid``.
        max_clients: The most clients whose keys are held (least recently used dropped).
        timeout: Seconds one answer may take.
    """

    def __init__(
        self,
        url: str,
        credential: str,
        http: httpx.AsyncClient,
        clock: Clock,
        *,
        min_refresh: float = 30.0,
        max_clients: int = _DEFAULT_MAX_CLIENTS,
        timeout: float = 5.0,
    ) -> None:
        if max_clients < 1 or min_refresh < 0:
            raise ValueError("max_clients must be >= 1 and min_refresh >= 0")
        self._url = url
        self._authorization = f"Bearer {credential}"
        self._http = http
        self._clock = clock
        self._min_refresh = min_refresh
        self._max_clients = max_clients
        self._timeout = timeout
        self._entries: OrderedDict[str, AgentKeys] = OrderedDict()
        self._asked_at: OrderedDict[str, float] = OrderedDict()
        self._inflight: dict[tuple[str, bool], asyncio.Future[AgentKeys]] = {}

    def __repr__(self) -> str:
        return f"AgentKeysCache({self._url!r})"  # Never the credential.

    def __len__(self) -> int:
        return len(self._entries)

    async def keys(self, client_id: str) -> KeySet:
        """The client's keys: cached while fresh, else asked for.

        Raises:
            AgentRefused: Frontdoor refuses the agent.
            AgentKeysUnavailable: No usable answer.
            AgentKeysRefused: The credential was refused.
        """
        entry = self._entries.get(client_id)
        if entry is not None and epoch_seconds(self._clock) < entry.expires_at:
            self._entries.move_to_end(client_id)
            return entry.keys
        return (await self._load(client_id, refresh=False)).keys

    async def refresh_for_unknown_kid(self, client_id: str) -> KeySet | None:
        """Ask again after a delegation named an unknown ``kid``, unless asked recently.

        Returns:
            The fresh keys, or ``None`` when this client was asked under ``min_refresh``
            seconds ago (the request is then refused with ``invalid_session``).

        Raises:
            AgentRefused: Frontdoor refuses the agent.
            AgentKeysUnavailable: No usable answer.
            AgentKeysRefused: The credential was refused.
        """
        asked = self._asked_at.get(client_id)
        if asked is not None and epoch_seconds(self._clock) - asked < self._min_refresh:
            return None
        return (await self._load(client_id, refresh=True)).keys

    async def _load(self, client_id: str, *, refresh: bool) -> AgentKeys:
        key = (client_id, refresh)
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[AgentKeys] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            entry = await self._ask(client_id, refresh=refresh)
        except BaseException as failure:
            future.set_exception(failure)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        else:
            future.set_result(entry)
            self._store(client_id, entry)
            return entry
        finally:
            del self._inflight[key]

    def _store(self, client_id: str, entry: AgentKeys) -> None:
        self._entries[client_id] = entry
        self._entries.move_to_end(client_id)
        while len(self._entries) > self._max_clients:
            self._entries.popitem(last=False)

    def _note_asked(self, client_id: str) -> None:
        self._asked_at[client_id] = epoch_seconds(self._clock)
        self._asked_at.move_to_end(client_id)
        while len(self._asked_at) > self._max_clients:
            self._asked_at.popitem(last=False)

    async def _ask(self, client_id: str, *, refresh: bool) -> AgentKeys:
        # Every attempt counts against the per-client throttle, failures included.
        self._note_asked(client_id)
        body: dict[str, Any] = {"client_id": client_id}
        if refresh:
            body["refresh"] = True
        response = await post(
            self._http,
            self._url,
            json=body,
            authorization=self._authorization,
            seconds=self._timeout,
            endpoint="agent-keys",
            unavailable=AgentKeysUnavailable,
        )
        if response.status_code == 403 and _error_of(response.content) == "invalid_client":
            raise AgentRefused("Frontdoor refuses this agent")
        answer = decode_answer(
            response,
            _Answer,
            endpoint="agent-keys",
            nothing="no keys",
            max_bytes=_MAX_BYTES,
            unavailable=AgentKeysUnavailable,
            refused=AgentKeysRefused,
        )
        if answer.client_id != client_id:
            _LOG.warning("frontdoor_sdk: agent-keys answered about another client")
            raise AgentKeysUnavailable("agent-keys answered about another client")
        now = epoch_seconds(self._clock)
        max_age = min(max(answer.max_age, 0.0), _MAX_AGE_CAP)
        return AgentKeys(keys=_key_set(answer.keys), fetched_at=now, expires_at=now + max_age)


def _error_of(content: bytes) -> str:
    try:
        return msgspec.json.decode(content, type=_Error).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return ""
