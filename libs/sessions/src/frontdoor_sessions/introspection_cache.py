"""Session state for introspection, cached in Redis and versioned by the tenant's event head.

Every change introspection reports (a Session ended, signed out or in, its scope narrowed,
an agent blocked, the agent policy changed) writes a ``session_events`` row that takes the
tenant's next ``stream_seq`` in the same transaction (ADR 0005 §2). A cache entry is tagged
with the tenant's ``stream_seq`` read **in the same statement** as the Session row, and the
tenant's *head* key holds the highest position any writer or reader has published. An
entry answers only while its tag is at least the head:

- a writer publishes the new head after its commit and before it answers (``await_streams``
  for every revoke, :func:`publish_head` after a sign-in or a narrowed refresh), so once a
  revoke has answered, every entry read before it is older than the head and is never used;
- a reader that sees a newer position than the head raises the head itself (one Lua
  script, monotone: the head never goes down), and a fill older than the head is not stored;
- a missing head (evicted, expired, a new tenant) answers nothing from the cache.

Keys carry the tenant in a Redis Cluster hash tag, so the head and the entry are read with
one ``MGET`` in one slot: ``fd:{<tenant>}:introspection:head`` and
``fd:{<tenant>}:introspection:ses:<sid>``. Entries live :data:`ENTRY_TTL_S`; the head
:data:`HEAD_TTL_S` from its last raise.
"""

from __future__ import annotations

from typing import Any, Final

import asyncpg
import msgspec
import structlog

__all__ = ["ENTRY_TTL_S", "HEAD_TTL_S", "CachedState", "IntrospectionCache", "head_key", "publish_current_head",
           "publish_head", "read_session_at_head"]

ENTRY_TTL_S: Final = 60
HEAD_TTL_S: Final = 30 * 86400

_log = structlog.get_logger("frontdoor.sessions.introspection_cache")

# KEYS[1] head, KEYS[2] entry (or absent); ARGV[1] position, ARGV[2] value, ARGV[3] ttl, ARGV[4] head ttl.
# Raises the head to the position if it is higher; stores the entry only if it is not older.
_RAISE = """
local seq = tonumber(ARGV[1])
local head = tonumber(redis.call('GET', KEYS[1]) or '-1')
if seq > head then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
  head = seq
end
if KEYS[2] and seq >= head then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
end
return head
"""


def head_key(tenant_id: str) -> str:
    return f"fd:{{{tenant_id}}}:introspection:head"


def _entry_key(tenant_id: str, session_id: str) -> str:
    return f"fd:{{{tenant_id}}}:introspection:ses:{session_id}"


class CachedState(msgspec.Struct, frozen=True, array_like=True):
    """What introspection needs of a Session and its agent's policy, at position ``seq``."""

    seq: int
    live: bool
    client_id: str
    user_id: str | None
    allowed: bool
    account: str | None
    scope: str | None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(CachedState).decode

_SESSION_AT_HEAD = (
    "SELECT s.ended_at IS NULL AS live, s.client_id, s.user_id, s.signed_in_at, s.account_id, s.scope,"
    " coalesce((SELECT seq FROM session_event_counters WHERE tenant_id = $1), 0) AS seq"
    " FROM pap_sessions s WHERE s.tenant_id = $1 AND s.id = $2")


async def read_session_at_head(conn: asyncpg.Connection, tenant_id: str, session_id: str) -> asyncpg.Record | None:
    """The Session's row and the tenant's event position in one statement (one snapshot)."""
    return await conn.fetchrow(_SESSION_AT_HEAD, tenant_id, session_id)


class IntrospectionCache:
    """The Redis side; every failure reads as a miss (introspection then asks PostgreSQL)."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis
        self._raise = redis.register_script(_RAISE)

    async def get(self, tenant_id: str, session_id: str) -> CachedState | None:
        try:
            head, raw = await self._redis.mget(head_key(tenant_id), _entry_key(tenant_id, session_id))
        except Exception:
            return None
        if head is None or raw is None:
            return None
        try:
            state = _decode(raw)
        except msgspec.DecodeError:
            return None
        return state if state.seq >= int(head) else None

    async def put(self, tenant_id: str, session_id: str, state: CachedState) -> None:
        try:
            await self._raise(keys=[head_key(tenant_id), _entry_key(tenant_id, session_id)],
                              args=[state.seq, _encode(state), ENTRY_TTL_S, HEAD_TTL_S])
        except Exception:
            _log.warning("introspection_cache_fill_failed", tenant_id=tenant_id)


async def publish_head(redis: Any, tenant_id: str, seq: int) -> None:
    """After a commit, before answering: no entry older than ``seq`` answers any more.

    Raises when Redis cannot take it: the change is committed, but the caller must not
    report it done (a retried revoke is idempotent and publishes again).
    """
    await redis.eval(_RAISE, 1, head_key(tenant_id), seq, b"", ENTRY_TTL_S, HEAD_TTL_S)


async def publish_current_head(redis: Any, conn: asyncpg.Connection, tenant_id: str) -> None:
    """:func:`publish_head` at the tenant's committed head (after a sign-in or a narrowed refresh)."""
    seq = await conn.fetchval("SELECT seq FROM session_event_counters WHERE tenant_id = $1", tenant_id)
    await publish_head(redis, tenant_id, int(seq or 0))
