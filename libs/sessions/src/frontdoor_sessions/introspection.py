"""Session state for company resource servers (RFC 7662 shape plus what PAP needs).

On the path of every company API call, so it costs one signature check with cached keys
and one primary-key read. It answers from PostgreSQL, the source of truth, so a
sign-out or a revocation shows on the very next request.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.compact_jws import MalformedJWS, parse_compact_jws
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.jws_verification import UnknownKeyId
from frontdoor_protocol.session_token import verify_session_token

from . import session_store
from .signer_cache import IssuerKeys
from .throttle import Throttle

__all__ = ["INACTIVE", "introspect"]

INACTIVE: dict[str, Any] = {"active": False}
# "Last used" is kept to the minute: this process writes it at most once a minute per Session.
_touched = Throttle(60.0)


def _claimed_resource(token: str) -> str | None:
    """The ``resource`` the token says it is bound to (verified right after, with the signature)."""
    try:
        payload = msgspec.json.decode(parse_compact_jws(token).payload)
    except (MalformedJWS, msgspec.DecodeError):
        return None
    resource = payload.get("resource") if isinstance(payload, dict) else None
    return resource if isinstance(resource, str) else None


async def introspect(conn: asyncpg.Connection, keys: IssuerKeys, *, tenant_id: str, issuer: str, token: str,
                     now: datetime) -> dict[str, Any]:
    """The state of the Session behind ``token``, or ``{"active": false}``.

    Inactive when the token does not verify for this tenant's issuer (another tenant's
    token included), has expired, its Session ended, or its agent is no longer allowed.
    """
    epoch = int(now.timestamp())
    audience = _claimed_resource(token)
    keyset = await keys.keyset(conn, tenant_id, now)
    try:
        claims = verify_session_token(token, issuer=issuer, keys=keyset, now=epoch, audience=audience)
    except UnknownKeyId:
        try:  # a key rotated within the cache window
            keyset = await keys.keyset(conn, tenant_id, now, refresh=True)
            claims = verify_session_token(token, issuer=issuer, keys=keyset, now=epoch, audience=audience)
        except ProtocolError:
            return INACTIVE
    except ProtocolError:
        return INACTIVE
    session = await session_store.find_session(conn, tenant_id, claims.sid)
    if session is None or not session.live or session.client_id != claims.client_id or session.user_id != claims.sub:
        return INACTIVE
    policy = await get_agent_policy(conn, tenant_id, client_id=claims.client_id)
    if not is_allowed(policy, claims.client_id):
        return INACTIVE
    if _touched.due((tenant_id, session.id)):
        await session_store.touch_session(conn, tenant_id, session.id, now=now)
    body: dict[str, Any] = {
        "active": True,
        "iss": claims.iss,
        "client_id": claims.client_id,
        "sub": claims.sub,
        "sid": claims.sid,
        "aud": claims.aud,
        "signed_in": session.signed_in,
        "account": session.account_id if session.signed_in else None,
        "scope": session.scope if session.signed_in else None,
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
