"""A run waiting for its sign-in: kept server-side, KEK-encrypted, in Redis until it expires.

Device Sign-In (PAP §4.6, RFC 8628) has the run wait for the admin to sign in as a test
user in another tab, so the run outlives the request that started it. What it needs to go
on is secret: the Session Token, the ``device_code`` (RFC 8628 §3.2: whoever holds it can
collect the sign-in), the run's DPoP private key. It never reaches the page or a URL: the
page carries only the run's ID, and the state is one Redis value per run,
``sim:pending:{tenant}:<run_id>``, encrypted under the KEK with the tenant and run ID as
associated data (a value moved to another tenant's or run's key does not decrypt), expiring
with the device code (``expires_in``; a Direct Sign-In waits 10 minutes; at most `MAX_WAIT_S`). A continue takes a short lock
per run (`PendingRuns.lock`), so a button press and the page's own poll never poll the
token endpoint twice at once. The lock is its owner's: a random token, set only if absent,
released (`PendingRuns.unlock`) and the run saved back (`PendingRuns.save` with the token) only
while it still holds that token, by a compare-and-delete (and compare-and-set) script over the
run's key and its lock's, both under the tenant's hash tag so they share a Redis Cluster slot.
So a resume slower than the lock's life neither frees nor overwrites the next owner's. Where
the run ends it is taken out whole (`PendingRuns.take`, GETDEL): one request finishes it.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any, Final

import msgspec
from frontdoor_core.redis_keys import shard
from frontdoor_tenancy.credentials.key_encryption import DecryptionError, Kek, row_aad

from .sign_in import DeviceStart, DirectStart
from .step import Step

__all__ = ["MAX_WAIT_S", "PendingRun", "PendingRuns", "SignInWait", "expired"]

MAX_WAIT_S: Final = 900
"""The longest a run waits for its sign-in, whatever the device code's ``expires_in``."""
_PURPOSE: Final = "simulator_pending_run"
_LOCK_MS: Final = 30_000

_UNLOCK: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Delete the lock KEYS[1] only while it holds its owner's token ARGV[1]."""

_SAVE_LOCKED: Final = """
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""
"""Set the run KEYS[1] to ARGV[1] (ARGV[2] seconds) only while its lock KEYS[2] holds the token ARGV[3]."""


class SignInWait(msgspec.Struct, kw_only=True):
    """The agent's side of a sign-in in progress: its Session, DPoP key, and the device code (Device
    Sign-In) or the PKCE verifier and state (Direct Sign-In)."""

    user_id: str
    session_id: str
    session_token: str
    dpop_jwk: dict[str, Any]
    dpop_nonce: str | None
    device: DeviceStart | None = None
    direct: DirectStart | None = None
    interval: int
    expires_at: int
    next_poll_at: int
    polls: int = 0
    company_domain: str = ""


class PendingRun(msgspec.Struct, kw_only=True):
    """Everything a waiting run needs to go on (secret: stored encrypted only)."""

    run_id: str
    tenant_id: str
    member_id: str
    member_email: str
    started_at: datetime
    steps: list[Step]
    wait: SignInWait
    include_operation: bool = False
    """The admin chose the operation step (a real perform webhook) for this run."""


def _key(tenant_id: str, run_id: str) -> str:
    return f"sim:pending:{shard(tenant_id)}:{run_id}"


def _lock_key(tenant_id: str, run_id: str) -> str:
    return _key(tenant_id, run_id) + ":lock"  # the run's hash tag: one Cluster slot with the run


class PendingRuns:
    """The tenant's waiting runs in Redis, encrypted under the KEK."""

    def __init__(self, redis: Any, kek: Kek) -> None:
        self.redis = redis
        self.kek = kek

    async def save(self, run: PendingRun, *, now: int, lock: str | None = None) -> bool:
        """Keep ``run`` until its device code expires (never past `MAX_WAIT_S`).

        ``lock``: the token of the continue lock the caller holds; the run is saved only while
        the lock still holds it (False otherwise: it expired and may be another request's).
        """
        ttl = max(1, min(run.wait.expires_at - now, MAX_WAIT_S))
        blob = self.kek.encrypt(msgspec.json.encode(run), aad=row_aad(_PURPOSE, run.tenant_id, run.run_id))
        if lock is None:
            await self.redis.set(_key(run.tenant_id, run.run_id), blob, ex=ttl)
            return True
        keys = [_key(run.tenant_id, run.run_id), _lock_key(run.tenant_id, run.run_id)]
        return bool(await self.redis.eval(_SAVE_LOCKED, 2, *keys, blob, ttl, lock))

    def _decode(self, blob: Any, tenant_id: str, run_id: str) -> PendingRun | None:
        if blob is None:
            return None
        try:
            raw = self.kek.decrypt(bytes(blob), aad=row_aad(_PURPOSE, tenant_id, run_id))
        except DecryptionError:
            return None
        run = msgspec.json.decode(raw, type=PendingRun)
        return run if run.tenant_id == tenant_id and run.run_id == run_id else None

    async def load(self, tenant_id: str, run_id: str) -> PendingRun | None:
        """The tenant's waiting run ``run_id``, or None (expired, finished or another tenant's)."""
        return self._decode(await self.redis.get(_key(tenant_id, run_id)), tenant_id, run_id)

    async def take(self, tenant_id: str, run_id: str) -> PendingRun | None:
        """Take the waiting run out of Redis (GETDEL): of requests ending it at once, one gets it, the others None."""
        return self._decode(await self.redis.getdel(_key(tenant_id, run_id)), tenant_id, run_id)

    async def lock(self, tenant_id: str, run_id: str) -> str | None:
        """Take the run's continue lock (30 s at most): its owner's token, or None when another request holds it."""
        token = secrets.token_urlsafe(16)
        taken = await self.redis.set(_lock_key(tenant_id, run_id), token, nx=True, px=_LOCK_MS)
        return token if taken else None

    async def unlock(self, tenant_id: str, run_id: str, token: str) -> bool:
        """Release the lock ``token`` took; a lock that expired and was taken by another request is left alone."""
        return bool(await self.redis.eval(_UNLOCK, 1, _lock_key(tenant_id, run_id), token))


def expired(wait: SignInWait, now: datetime) -> bool:
    """Whether the run's device code has expired."""
    return int(now.timestamp()) >= wait.expires_at
