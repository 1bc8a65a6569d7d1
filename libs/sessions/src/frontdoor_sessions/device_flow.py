"""Device Sign-In state (PAP §4.6, RFC 8628) in Redis: hot, short-lived, disposable.

One hash per device authorization, keyed by a *handle*: the SHA-256 of the device code,
so the code itself is never stored and the handle (which the pages keep) cannot poll.
A second key maps the user code to the handle while it can still be entered.

States: ``pending`` -> ``approved`` | ``denied``; ``approved`` -> ``used`` (the first
successful poll takes it). Expiry is decided by the injected clock against
``expires_ms``; the Redis TTL (lifetime plus a grace period) only collects garbage, so
within the grace period a late poll is ``expired_token`` rather than ``invalid_grant``.

Every transition is one Lua script (atomic): of concurrent polls only one takes an
approval; ``slow_down`` adds 5 s to the interval for good (RFC 8628 §3.5). Opening the
verification link approves nothing (PAP-4.6-01): only `approve` does, called by the
device page after the handoff and consent.

Guessing user codes is limited per tenant and per requester (`find_by_user_code`);
there are 20^8 ≈ 2.6e10 codes and each lives 10 minutes.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import RateLimited, Unavailable
from frontdoor_core.redis_keys import shard

__all__ = [
    "USER_CODE_ALPHABET",
    "DevicePoll",
    "DeviceRequest",
    "DeviceStart",
    "DeviceStore",
    "format_user_code",
    "normalize_user_code",
]

USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ"
"""No vowels (no words), no digits, nothing that reads like another character."""
_USER_CODE_LENGTH = 8
_GRACE_S = 600

DeviceStatus = Literal["pending", "approved", "denied", "used"]
PollStatus = Literal["pending", "slow_down", "denied", "expired", "used", "unknown", "wrong_client", "wrong_user",
                     "approved"]


class DeviceStart(msgspec.Struct, frozen=True, kw_only=True):
    """A new device authorization; ``device_code`` goes to the agent only."""

    device_code: str
    user_code: str
    handle: str
    expires_in: int
    interval: int


class DeviceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What the device page may know about a device authorization (no device code).

    Attributes:
        handle: Names the authorization for `approve` / `deny` (cannot poll).
        scope: The requested scopes, in the agent's order.
        user_code: As shown (``XXXX-XXXX``).
    """

    handle: str
    client_id: str
    scope: tuple[str, ...]
    user_code: str
    status: DeviceStatus
    expires_at: datetime
    expired: bool


class DevicePoll(msgspec.Struct, frozen=True, kw_only=True):
    """One poll's outcome; ``account_id`` and ``granted_scope`` only when ``approved``."""

    status: PollStatus
    interval: int = 0
    handle: str = ""
    scope: str = ""
    account_id: str | None = None
    granted_scope: str | None = None
    idp_session: str = ""
    """`idp_session_hash` of the IdP session the user signed in with (``oidc`` login with a ``sid``)."""
    login_via: str = ""
    """Which login vouched for ``account_id`` (``oidc``, ``handoff``); empty when the approval did not say."""


def normalize_user_code(raw: str) -> str | None:
    """Upper-case, hyphens and spaces dropped; None unless 8 letters of the alphabet."""
    code = raw.upper().replace("-", "").replace(" ", "")
    if len(code) != _USER_CODE_LENGTH or any(c not in USER_CODE_ALPHABET for c in code):
        return None
    return code


def format_user_code(code: str) -> str:
    """``BCDFGHJK`` -> ``BCDF-GHJK``, as shown to the user."""
    return f"{code[:4]}-{code[4:]}"


_HANDLE = re.compile(r"^[0-9a-f]{64}$")


def _handle(device_code: str) -> str:
    return hashlib.sha256(device_code.encode()).hexdigest()


def _ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


_POLL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local f = redis.call('HMGET', KEYS[1], 'client_id', 'status', 'expires_ms', 'interval', 'last_poll_ms', 'user_id',
                     'account_id', 'granted_scope', 'scope', 'idp_session', 'login_via')
if f[1] ~= ARGV[2] then return {'wrong_client'} end
if f[2] == 'used' then return {'used'} end
local now = tonumber(ARGV[1])
if now >= tonumber(f[3]) then return {'expired'} end
if f[6] and f[6] ~= ARGV[3] then return {'wrong_user'} end
if not f[6] then redis.call('HSET', KEYS[1], 'user_id', ARGV[3]) end
if f[2] == 'denied' then return {'denied'} end
local interval = tonumber(f[4])
if f[5] and now - tonumber(f[5]) < interval * 1000 then
  interval = interval + 5
  redis.call('HSET', KEYS[1], 'interval', interval, 'last_poll_ms', ARGV[1])
  return {'slow_down', tostring(interval)}
end
redis.call('HSET', KEYS[1], 'last_poll_ms', ARGV[1])
if f[2] == 'approved' then
  redis.call('HSET', KEYS[1], 'status', 'used')
  return {'approved', tostring(interval), f[7], f[8], f[9], f[10] or '', f[11] or ''}
end
return {'pending', tostring(interval)}
"""

# KEYS[1] record, KEYS[2] user-code index; ARGV now_ms, new status, account, granted scope, IdP session,
# login_via
_DECIDE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'unknown' end
local f = redis.call('HMGET', KEYS[1], 'status', 'expires_ms')
if f[1] ~= 'pending' then return f[1] end
if tonumber(ARGV[1]) >= tonumber(f[2]) then return 'expired' end
if ARGV[2] == 'approved' then
  redis.call('HSET', KEYS[1], 'status', 'approved', 'account_id', ARGV[3], 'granted_scope', ARGV[4],
             'idp_session', ARGV[5], 'login_via', ARGV[6])
else
  redis.call('HSET', KEYS[1], 'status', 'denied')
end
redis.call('DEL', KEYS[2])
return 'ok'
"""

# Give an approval back when redeeming it failed on our side (not the agent's fault).
_RESTORE = """
if redis.call('HGET', KEYS[1], 'status') == 'used' then
  redis.call('HSET', KEYS[1], 'status', 'approved')
  return 1
end
return 0
"""


class DeviceStore:
    """Device authorizations of every tenant; one instance per process (or per request: it holds no state)."""

    def __init__(self, redis: aioredis.Redis, *, clock: Callable[[], datetime] | None = None, lifetime_s: int = 600,
                 interval_s: int = 5, misses_per_tenant_per_minute: int = 100,
                 misses_per_requester_per_minute: int = 10) -> None:
        self._redis = redis
        self._clock = clock or (lambda: datetime.now(UTC))
        self.lifetime_s = lifetime_s
        self.interval_s = interval_s
        self._tenant_misses = misses_per_tenant_per_minute
        self._requester_misses = misses_per_requester_per_minute
        self._poll = redis.register_script(_POLL)
        self._decide = redis.register_script(_DECIDE)
        self._restore = redis.register_script(_RESTORE)

    @staticmethod
    def _key(tenant_id: str, handle: str) -> str:
        return f"dev:{shard(tenant_id)}:{handle}"

    @staticmethod
    def _user_key(tenant_id: str, code: str) -> str:
        return f"devu:{shard(tenant_id)}:{code}"

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except Exception:
            raise Unavailable("device_store_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None

    async def start(self, tenant_id: str, *, client_id: str, scope: str, now: datetime | None = None) -> DeviceStart:
        """A new pending authorization for ``client_id`` asking for ``scope`` (space-separated)."""
        now = now or self._clock()
        device_code = secrets.token_urlsafe(32)
        handle = _handle(device_code)
        ttl = self.lifetime_s + _GRACE_S
        fields: dict[Any, Any] = {"client_id": client_id, "scope": scope, "status": "pending",
                  "expires_ms": str(_ms(now) + self.lifetime_s * 1000), "interval": str(self.interval_s),
                  "created_ms": str(_ms(now))}
        for _ in range(8):
            code = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(_USER_CODE_LENGTH))
            fields["user_code"] = code
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(self._key(tenant_id, handle), mapping=fields)
                pipe.expire(self._key(tenant_id, handle), ttl)
                pipe.set(self._user_key(tenant_id, code), handle, nx=True, ex=self.lifetime_s)
                results = await self._call(pipe.execute())
            if results[2]:
                return DeviceStart(device_code=device_code, user_code=format_user_code(code), handle=handle,
                                   expires_in=self.lifetime_s, interval=self.interval_s)
        await self._call(self._redis.delete(self._key(tenant_id, handle)))
        raise Unavailable("user_code_space_busy", "Temporarily unavailable; retry shortly.", retry_after=1)

    async def get(self, tenant_id: str, handle: str, *, now: datetime | None = None) -> DeviceRequest | None:
        """The authorization behind ``handle``, or None when it is gone."""
        now = now or self._clock()
        if not _HANDLE.match(handle):
            return None
        raw = await self._call(self._redis.hgetall(self._key(tenant_id, handle)))
        if not raw:
            return None
        f = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
             for k, v in raw.items()}
        expires_ms = int(f["expires_ms"])
        return DeviceRequest(handle=handle, client_id=f["client_id"], scope=tuple(f["scope"].split(" ")),
                             user_code=format_user_code(f["user_code"]), status=f["status"],  # type: ignore[arg-type]
                             expires_at=datetime.fromtimestamp(expires_ms / 1000, UTC),
                             expired=_ms(now) >= expires_ms)

    async def _over(self, key: str, limit: int) -> bool:
        count = await self._call(self._redis.get(key))
        return count is not None and int(count) >= limit

    async def find_by_user_code(self, tenant_id: str, raw_code: str, *, now: datetime | None = None,
                                requester: str | None = None) -> DeviceRequest | None:
        """The pending authorization a user typed the code of, or None.

        Wrong codes are counted per tenant and per ``requester`` (the browser's network
        or flow) in one-minute windows; past either limit every lookup is refused.

        Raises:
            RateLimited: too many wrong codes lately (429 with ``retry_after``).
        """
        now = now or self._clock()
        minute = int(now.timestamp()) // 60
        retry = 60 - int(now.timestamp()) % 60
        counters = [(f"devmiss:{shard(tenant_id)}:{minute}", self._tenant_misses)]
        if requester is not None:
            digest = hashlib.sha256(requester.encode()).hexdigest()[:32]
            counters.append((f"devmiss:{shard(tenant_id)}:{digest}:{minute}", self._requester_misses))
        for key, limit in counters:
            if await self._over(key, limit):
                raise RateLimited("too_many_codes", "Too many wrong codes; wait a minute and retry.",
                                  retry_after=retry)
        code = normalize_user_code(raw_code)
        handle = None if code is None else await self._call(self._redis.get(self._user_key(tenant_id, code)))
        found = None
        if handle is not None:
            found = await self.get(tenant_id, handle.decode() if isinstance(handle, bytes) else handle, now=now)
        if found is None or found.expired or found.status != "pending":
            async with self._redis.pipeline(transaction=False) as pipe:
                for key, _ in counters:
                    pipe.incr(key)
                    pipe.expire(key, 120)
                await self._call(pipe.execute())
            return None
        return found

    async def _handle_of(self, tenant_id: str, ref: str) -> str | None:
        if _HANDLE.match(ref):
            return ref
        code = normalize_user_code(ref)
        if code is None:
            return None
        handle = await self._call(self._redis.get(self._user_key(tenant_id, code)))
        return None if handle is None else (handle.decode() if isinstance(handle, bytes) else str(handle))

    async def _decide_on(self, tenant_id: str, ref: str, status: str, *, now: datetime | None,
                         account_id: str = "", granted_scope: str = "", idp_session: str = "",
                         login_via: str = "") -> bool:
        handle = await self._handle_of(tenant_id, ref)
        if handle is None:
            return False
        code = await self._call(self._redis.hget(self._key(tenant_id, handle), "user_code"))
        code = code.decode() if isinstance(code, bytes) else (code or "")
        result = await self._call(self._decide(keys=[self._key(tenant_id, handle), self._user_key(tenant_id, code)],
                                               args=[_ms(now or self._clock()), status, account_id, granted_scope,
                                                     idp_session, login_via]))
        return (result.decode() if isinstance(result, bytes) else str(result)) == "ok"

    async def approve(self, tenant_id: str, ref: str, account_id: str, granted_scope: str | list[str] | tuple[str, ...],
                      *, now: datetime | None = None, idp_session: str | None = None,
                      login_via: str | None = None) -> bool:
        """The user signed in as ``account_id`` and consented to ``granted_scope``.

        ``idp_session``: the `idp_session_hash` of the IdP session the user signed in
        with, kept with the sign-in this approval completes (Back-Channel Logout);
        ``login_via``: which login vouched for ``account_id`` (``oidc`` or ``handoff``,
        `frontdoor_sessions.sign_in.LoginVia`), kept with it too.

        ``ref`` is the `DeviceRequest` handle or its user code. True when this approved a
        pending, unexpired authorization; False otherwise (unknown, expired, already
        decided). The grant checks the scope against the request and the tenant's offer
        when the agent redeems it; the page should offer only requested scopes.
        """
        scope = granted_scope if isinstance(granted_scope, str) else " ".join(granted_scope)
        if not account_id or not scope:
            raise ValueError("account_id and granted_scope are required")
        return await self._decide_on(tenant_id, ref, "approved", now=now, account_id=account_id,
                                     granted_scope=scope, idp_session=idp_session or "", login_via=login_via or "")

    async def deny(self, tenant_id: str, ref: str, *, now: datetime | None = None) -> bool:
        """The user refused; the agent's next poll is ``access_denied``. Returns as `approve`."""
        return await self._decide_on(tenant_id, ref, "denied", now=now)

    async def poll(self, tenant_id: str, device_code: str, *, client_id: str, user_id: str,
                   now: datetime | None = None) -> DevicePoll:
        """One poll by ``client_id`` for ``user_id``; an approval is taken (status ``used``) here."""
        handle = _handle(device_code)
        raw = await self._call(self._poll(keys=[self._key(tenant_id, handle)],
                                          args=[_ms(now or self._clock()), client_id, user_id]))
        out = [r.decode() if isinstance(r, bytes) else r for r in raw]
        status = out[0]
        if status == "approved":
            return DevicePoll(status="approved", interval=int(out[1]), handle=handle, account_id=out[2],
                              granted_scope=out[3], scope=out[4], idp_session=out[5], login_via=out[6])
        interval = int(out[1]) if len(out) > 1 else 0
        return DevicePoll(status=status, interval=interval, handle=handle)  # type: ignore[arg-type]

    async def give_back(self, tenant_id: str, handle: str) -> None:
        """Undo taking an approval whose redemption failed on our side, so a retry can work."""
        await self._call(self._restore(keys=[self._key(tenant_id, handle)]))
