"""Session state for company resource servers (RFC 7662 shape plus what PAP needs).

On the path of every company API call, so it costs one signature check with cached keys
and, when the state is cached, one Redis ``MGET``; otherwise one statement for the Session
(with the tenant's event position) and one for the agent policy. The cache
(:mod:`.introspection_cache`) is versioned by the tenant's event head, which every revoke
publishes before it answers, so a sign-out or a revocation shows on the very next request.
"""

from __future__ import annotations

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


async def _verified(connect: Connect, keys: IssuerKeys, *, tenant_id: str, issuer: str, token: str,
                    now: datetime) -> SessionTokenClaims | None:
    epoch = int(now.timestamp())
    audience = _claimed_resource(token)
    keyset = keys.cached(tenant_id)
    if keyset is None:
        async with connect() as conn:
            keyset = await keys.keyset(conn, tenant_id, now)
    try:
        return verify_session_token(token, issuer=issuer, keys=keyset, now=epoch, audience=audience)
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
