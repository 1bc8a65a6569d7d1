"""Direct Sign-In authorization codes (PAP §4.5, RFC 6749 §4.1) in Redis: hot, one use.

A code is 256 random bits (base64url), given once to the user's browser in the redirect
to the agent. Only its SHA-256 names the record, so Redis never holds a usable code. The
record binds what the exchange must match: the ``client_id``, the exact ``redirect_uri``,
the PKCE ``code_challenge`` (S256 only), the requested and the granted scope and the
account the user signed in to.

States: ``pending`` -> ``used`` (the first redemption by its client takes it, whatever
comes of it). Expiry (60 s) is decided by the injected clock against ``expires_ms``; the
Redis TTL only collects garbage. A used record is kept for an hour so that a second
redemption is recognised: it is marked ``reused`` and answers the ``sign_in_id`` the
first one issued, which the grant revokes (RFC 6749 §4.1.2). Every transition is one Lua
script, so of concurrent redemptions exactly one takes the code and the other is a reuse.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.redis_keys import shard

__all__ = ["CODE_LIFETIME_S", "AuthorizationCodeStore", "CodeTake", "IssuedCode"]

CODE_LIFETIME_S = 60
_PENDING_TTL_S = 600
_USED_TTL_S = 3600

TakeStatus = Literal["taken", "unknown", "expired", "wrong_client", "used"]


class IssuedCode(msgspec.Struct, frozen=True, kw_only=True):
    """What a code was issued for (everything but the code itself)."""

    client_id: str
    redirect_uri: str
    code_challenge: str
    requested_scope: str
    scope: str
    account_id: str
    profile: str = "0.2"
    """``1.0`` when only a 1.0 redemption may take it (an RFC 8252 loopback ``redirect_uri``)."""
    idp_session: str = ""
    """`idp_session_hash` of the IdP session the user signed in with (an ``oidc`` login whose
    ID token had a ``sid``), kept with the sign-in for Back-Channel Logout; empty otherwise."""
    login_via: str = ""
    """Which login vouched for ``account_id`` (``oidc``, ``handoff``), kept with the sign-in; empty: not said."""


class CodeTake(msgspec.Struct, frozen=True, kw_only=True):
    """One redemption attempt: ``code`` only when ``taken``; ``sign_in_id`` of a reused code."""

    status: TakeStatus
    handle: str = ""
    code: IssuedCode | None = None
    sign_in_id: str | None = None


def _handle(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


# KEYS[1] record; ARGV now_ms, client_id, used ttl
_TAKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local f = redis.call('HMGET', KEYS[1], 'client_id', 'status', 'expires_ms', 'sign_in_id', 'redirect_uri',
                     'code_challenge', 'requested_scope', 'scope', 'account_id', 'profile', 'idp_session',
                     'login_via')
if f[1] ~= ARGV[2] then return {'wrong_client'} end
if f[2] == 'used' then
  redis.call('HSET', KEYS[1], 'reused', '1')
  return {'used', f[4] or ''}
end
if tonumber(ARGV[1]) >= tonumber(f[3]) then return {'expired'} end
redis.call('HSET', KEYS[1], 'status', 'used')
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return {'taken', f[5], f[6], f[7], f[8], f[9], f[10] or '0.2', f[11] or '', f[12] or ''}
"""

# KEYS[1] record; ARGV sign_in_id. Returns 1 when a reuse was seen before the binding.
_BIND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'sign_in_id', ARGV[1])
if redis.call('HGET', KEYS[1], 'reused') then return 1 end
return 0
"""

# Give a taken code back when redeeming it failed on our side (not the agent's fault).
_RESTORE = """
local f = redis.call('HMGET', KEYS[1], 'status', 'sign_in_id', 'reused')
if f[1] == 'used' and not f[2] and not f[3] then
  redis.call('HSET', KEYS[1], 'status', 'pending')
  return 1
end
return 0
"""


class AuthorizationCodeStore:
    """Authorization codes of every tenant; one instance per process (it holds no state)."""

    def __init__(self, redis: aioredis.Redis, *, clock: Callable[[], datetime] | None = None,
                 lifetime_s: int = CODE_LIFETIME_S) -> None:
        self._redis = redis
        self._clock = clock or (lambda: datetime.now(UTC))
        self.lifetime_s = lifetime_s
        self._take = redis.register_script(_TAKE)
        self._bind = redis.register_script(_BIND)
        self._restore = redis.register_script(_RESTORE)

    @staticmethod
    def _key(tenant_id: str, handle: str) -> str:
        return f"authz:{shard(tenant_id)}:{handle}"

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except Exception:
            raise Unavailable("code_store_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None

    async def issue(self, tenant_id: str, issued: IssuedCode, *, now: datetime | None = None) -> str:
        """A new code for ``issued``; the value goes to the user's browser only, never to a log."""
        if not issued.account_id or not issued.scope:
            raise ValueError("account_id and scope are required")
        now = now or self._clock()
        code = secrets.token_urlsafe(32)
        fields: dict[Any, Any] = {**msgspec.structs.asdict(issued), "status": "pending",
                  "expires_ms": str(_ms(now) + self.lifetime_s * 1000)}
        key = self._key(tenant_id, _handle(code))
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, _PENDING_TTL_S)
            await self._call(pipe.execute())
        return code

    async def take(self, tenant_id: str, code: str, *, client_id: str, now: datetime | None = None) -> CodeTake:
        """Redeem ``code`` for ``client_id``: taken once; a second time is ``used`` (and remembered).

        Another client's code is ``wrong_client`` and left untouched.
        """
        handle = _handle(code)
        raw = await self._call(self._take(keys=[self._key(tenant_id, handle)],
                                          args=[_ms(now or self._clock()), client_id, _USED_TTL_S]))
        out = [r.decode() if isinstance(r, bytes) else r for r in raw]
        status = out[0]
        if status == "taken":
            return CodeTake(status="taken", handle=handle, code=IssuedCode(
                client_id=client_id, redirect_uri=out[1], code_challenge=out[2], requested_scope=out[3],
                scope=out[4], account_id=out[5], profile=out[6], idp_session=out[7],
                login_via=out[8]))
        if status == "used":
            return CodeTake(status="used", handle=handle, sign_in_id=out[1] or None)
        return CodeTake(status=status, handle=handle)  # type: ignore[arg-type]

    async def bind_sign_in(self, tenant_id: str, handle: str, sign_in_id: str) -> bool:
        """Remember what the code issued; True when it was presented again meanwhile (revoke it)."""
        reused = await self._call(self._bind(keys=[self._key(tenant_id, handle)], args=[sign_in_id]))
        return bool(int(reused))

    async def give_back(self, tenant_id: str, handle: str) -> None:
        """Undo taking a code whose redemption failed on our side, unless it was reused meanwhile."""
        await self._call(self._restore(keys=[self._key(tenant_id, handle)]))
