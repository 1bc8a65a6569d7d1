"""PAP 1.0 browser-join codes in Redis: issued to a browser, authorized by its agent, used once.

The three steps of [S §6] as Frontdoor hosts them (ADR 0004 §8):

1. :meth:`JoinCodeStore.issue`: a code of 256 random bits for the browser that asked, bound
   to the SHA-256 of the join cookie set in the same response. Only the code's SHA-256
   names the record, so Redis never holds a usable code or cookie.
2. :meth:`JoinCodeStore.authorize`: the agent's verified Session (and the sign-in of a live
   access token, if it sent one) is attached to a ``pending`` code, once: a second
   authorization of the same code is refused, so nobody can swap the Session under it.
3. :meth:`JoinCodeStore.redeem`: the browser's submission **deletes the record first**
   ("the first submission consumes the code even if validation fails"), then the cookie
   must match (never a code from a message or another browser) and step 2 must be done.

Expiry (:data:`JOIN_CODE_LIFETIME_S`) is decided by the injected clock against
``expires_ms``; the Redis TTL only collects garbage. Each transition is one Lua script.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.redis_keys import shard

__all__ = [
    "JOIN_CODE_LIFETIME_S",
    "AuthorizeStatus",
    "JoinCodeStore",
    "JoinGrant",
    "JoinRedemption",
    "RedeemStatus",
    "join_cookie_hash",
]

JOIN_CODE_LIFETIME_S = 120
_GARBAGE_TTL_S = 600

AuthorizeStatus = Literal["authorized", "unknown", "expired", "used"]
RedeemStatus = Literal["joined", "unknown", "expired", "wrong_browser", "not_authorized"]

_FIELDS = ("client_id", "sid", "sub", "session", "agent_id", "account", "scope", "sgn")


class JoinGrant(msgspec.Struct, frozen=True, kw_only=True):
    """What step 2 vouched for: the agent's Session and, when signed in, its sign-in."""

    client_id: str
    sid: str
    sub: str
    session: str
    agent_id: str | None = None
    account: str | None = None
    scope: str | None = None
    sgn: str | None = None


class JoinRedemption(msgspec.Struct, frozen=True, kw_only=True):
    """One submission of a code: ``grant`` only when ``joined``."""

    status: RedeemStatus
    grant: JoinGrant | None = None


def _handle(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def join_cookie_hash(secret: str) -> str:
    """The SHA-256 (hex) of a join cookie's value, the only form in which it is stored."""
    return hashlib.sha256(b"frontdoor/join-cookie/v1\x00" + secret.encode()).hexdigest()


def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


# KEYS[1] record; ARGV now_ms, then the grant's field/value pairs.
_AUTHORIZE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms')
if f[1] ~= 'pending' then return 'used' end
if tonumber(ARGV[1]) >= tonumber(f[2]) then return 'expired' end
redis.call('HSET', KEYS[1], 'status', 'authorized', unpack(ARGV, 2))
return 'authorized'
"""

# KEYS[1] record. Consumed whatever comes next: read and delete in one step.
_CONSUME = """
local all = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return all
"""


class JoinCodeStore:
    """Join codes of every tenant; one instance per process (it holds no state)."""

    def __init__(self, redis: aioredis.Redis, *, clock: Callable[[], datetime] | None = None,
                 lifetime_s: int = JOIN_CODE_LIFETIME_S) -> None:
        self._redis = redis
        self._clock = clock or (lambda: datetime.now(UTC))
        self.lifetime_s = lifetime_s
        self._authorize = redis.register_script(_AUTHORIZE)
        self._consume = redis.register_script(_CONSUME)

    @staticmethod
    def _key(tenant_id: str, code: str) -> str:
        return f"join:{shard(tenant_id)}:{_handle(code)}"

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except Exception:
            raise Unavailable("join_store_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None

    async def issue(self, tenant_id: str, *, cookie_secret: str, now: datetime | None = None) -> str:
        """A new pending code bound to the browser holding ``cookie_secret``; never logged."""
        if len(cookie_secret) < 32:
            raise ValueError("the join cookie needs at least 32 characters of randomness")
        now = now or self._clock()
        code = secrets.token_urlsafe(32)
        key = self._key(tenant_id, code)
        fields = {"status": "pending", "cookie": join_cookie_hash(cookie_secret),
                  "expires_ms": str(_ms(now) + self.lifetime_s * 1000)}
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            pipe.expire(key, _GARBAGE_TTL_S)
            await self._call(pipe.execute())
        return code

    async def authorize(self, tenant_id: str, code: str, grant: JoinGrant, *,
                        now: datetime | None = None) -> AuthorizeStatus:
        """Attach ``grant`` to a pending, unexpired code (step 2), once."""
        pairs: list[str] = []
        for name in _FIELDS:
            value = getattr(grant, name)
            if value is not None:
                pairs.extend((f"g_{name}", value))
        raw = await self._call(self._authorize(keys=[self._key(tenant_id, code)],
                                               args=[_ms(now or self._clock()), *pairs]))
        status = raw.decode() if isinstance(raw, bytes) else str(raw)
        return status  # type: ignore[return-value]

    async def redeem(self, tenant_id: str, code: str, *, cookie_secret: str | None,
                     now: datetime | None = None) -> JoinRedemption:
        """The browser's submission (step 3): the code is gone after this call, whatever it answers."""
        raw = await self._call(self._consume(keys=[self._key(tenant_id, code)]))
        items = [r.decode() if isinstance(r, bytes) else str(r) for r in raw]
        record = dict(zip(items[::2], items[1::2], strict=True))
        if not record:
            return JoinRedemption(status="unknown")
        if _ms(now or self._clock()) >= int(record.get("expires_ms", "0")):
            return JoinRedemption(status="expired")
        if cookie_secret is None or not hmac.compare_digest(record.get("cookie", ""),
                                                            join_cookie_hash(cookie_secret)):
            return JoinRedemption(status="wrong_browser")
        if record.get("status") != "authorized":
            return JoinRedemption(status="not_authorized")
        values = {name: record.get(f"g_{name}") for name in _FIELDS}
        return JoinRedemption(status="joined", grant=msgspec.convert(values, JoinGrant))
