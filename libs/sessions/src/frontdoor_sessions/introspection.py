"""Session state for company resource servers (RFC 7662 shape plus what PAP needs).

On the path of every company API call, so it costs one signature check with cached keys
(none for a token this process already verified with the same key set) and, when the
state is cached, one Redis ``MGET``; otherwise one statement for the Session
(with the tenant's event position) and one for the agent policy. The cache
(:mod:`.introspection_cache`) is versioned by the tenant's event head, which every revoke
publishes before it answers, so a sign-out or a revocation shows on the very next request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.compact_jws import MalformedJWS, parse_compact_jws
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.jws_verification import UnknownKeyId
from frontdoor_protocol.session_token import SessionTokenClaims, verify_session_token

from . import session_store
from .introspection_cache import CachedState, IntrospectionCache, read_session_at_head
from .signer_cache import IssuerKeys
from .throttle import Throttle

__all__ = ["INACTIVE", "introspect"]

INACTIVE: dict[str, Any] = {"active": False}
# "Last used" is kept to the minute: this process writes it at most once a minute per Session
# (on a cache miss; entries live a minute, so a Session in use is touched about once a minute).
_touched = Throttle(60.0)

Connect = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]
"""``pool.acquire``: a connection is taken only when PostgreSQL must be asked."""


def _claimed_resource(token: str) -> str | None:
    """The ``resource`` the token says it is bound to (verified right after, with the signature)."""
    try:
        payload = msgspec.json.decode(parse_compact_jws(token).payload)
    except (MalformedJWS, msgspec.DecodeError):
        return None
    resource = payload.get("resource") if isinstance(payload, dict) else None
    return resource if isinstance(resource, str) else None


class _Verified:
    """Tokens this process verified, by tenant and digest, with the key set that verified them.

    A company's resource server introspects the same Session Token on every request until
    it expires; its signature cannot change. A hit stands only while the tenant's cached key
    set is the very one that verified it (a refresh, every 30 s or on rotation, verifies
    again), and only strictly before ``exp`` and not before ``iat`` minus the skew (the
    skew's margins are left to the full check).
    """

    def __init__(self, max_entries: int = 50_000) -> None:
        self._max = max_entries
        self._held: dict[tuple[str, bytes], tuple[object, SessionTokenClaims]] = {}

    def get(self, tenant_id: str, digest: bytes, keyset: object, epoch: int) -> SessionTokenClaims | None:
        hit = self._held.get((tenant_id, digest))
        if hit is None or hit[0] is not keyset:
            return None
        claims = hit[1]
        return claims if claims.iat - _SKEW_S <= epoch < claims.exp else None

    def put(self, tenant_id: str, digest: bytes, keyset: object, claims: SessionTokenClaims) -> None:
        if len(self._held) >= self._max:
            self._held.clear()
        self._held[(tenant_id, digest)] = (keyset, claims)


_SKEW_S = 60
_verified_tokens = _Verified()


async def _verified(connect: Connect, keys: IssuerKeys, *, tenant_id: str, issuer: str, token: str,
                    now: datetime) -> SessionTokenClaims | None:
    epoch = int(now.timestamp())
    keyset = keys.cached(tenant_id)
    digest = hashlib.sha256(token.encode()).digest()
    if keyset is not None:
        known = _verified_tokens.get(tenant_id, digest, keyset, epoch)
        if known is not None:
            return known
    audience = _claimed_resource(token)
    if keyset is None:
        async with connect() as conn:
            keyset = await keys.keyset(conn, tenant_id, now)
    try:
        claims = verify_session_token(token, issuer=issuer, keys=keyset, now=epoch, audience=audience)
        _verified_tokens.put(tenant_id, digest, keyset, claims)
        return claims
    except UnknownKeyId:
        try:  # a key rotated within the cache window
            async with connect() as conn:
                keyset = await keys.keyset(conn, tenant_id, now, refresh=True)
            return verify_session_token(token, issuer=issuer, keys=keyset, now=epoch, audience=audience)
        except ProtocolError:
            return None
    except ProtocolError:
        return None


async def _load(connect: Connect, cache: IntrospectionCache | None, tenant_id: str, claims: SessionTokenClaims,
                now: datetime) -> CachedState | None:
    """From PostgreSQL: the Session row tagged with the tenant's position, then the policy."""
    async with connect() as conn:
        row = await read_session_at_head(conn, tenant_id, claims.sid)
        if row is None:
            return None
        # Read after the tag: the policy is at least as new as the position it is stored under.
        policy = await get_agent_policy(conn, tenant_id, client_id=row["client_id"])
        signed_in = row["signed_in_at"] is not None and row["account_id"] is not None
        state = CachedState(seq=int(row["seq"]), live=bool(row["live"]), client_id=row["client_id"],
                            user_id=row["user_id"], allowed=is_allowed(policy, row["client_id"]),
                            account=row["account_id"] if signed_in else None,
                            scope=row["scope"] if signed_in else None)
        if state.live and _touched.due((tenant_id, claims.sid)):
            await session_store.touch_session(conn, tenant_id, claims.sid, now=now)
    if cache is not None:
        await cache.put(tenant_id, claims.sid, state)
    return state


async def introspect(connect: Connect, keys: IssuerKeys, *, tenant_id: str, issuer: str, token: str,
                     now: datetime, cache: IntrospectionCache | None = None) -> dict[str, Any]:
    """The state of the Session behind ``token``, or ``{"active": false}``.

    Inactive when the token does not verify for this tenant's issuer (another tenant's
    token included), has expired, its Session ended, or its agent is no longer allowed.
    """
    claims = await _verified(connect, keys, tenant_id=tenant_id, issuer=issuer, token=token, now=now)
    if claims is None:
        return INACTIVE
    state = await cache.get(tenant_id, claims.sid) if cache is not None else None
    if state is None:
        state = await _load(connect, cache, tenant_id, claims, now)
    if (state is None or not state.live or not state.allowed or state.client_id != claims.client_id
            or state.user_id != claims.sub):
        return INACTIVE
    body: dict[str, Any] = {
        "active": True,
        "iss": claims.iss,
        "client_id": claims.client_id,
        "sub": claims.sub,
        "sid": claims.sid,
        "aud": claims.aud,
        "signed_in": state.account is not None,
        "account": state.account,
        "scope": state.scope,
        "exp": claims.exp,
        "iat": claims.iat,
        "token_type": "DPoP" if claims.cnf else "Bearer",
        "token_use": "session",
    }
    if claims.cnf is not None:
        body["cnf"] = {"jkt": claims.cnf.jkt}
    if claims.resource is not None:
        body["resource"] = claims.resource
    return body
