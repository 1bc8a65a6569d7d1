"""PAP 1.0 Sessions the agent names (ADR 0004 §5, [S §3]): state behind the Session JWTs.

The agent signs a ``Poppy-Session`` JWT for every request; the signatures are checked
elsewhere (pure, in ``frontdoor_protocol``). What needs Frontdoor's state is here:

- first sight of (tenant, ``client_id``, ``sid``) creates a signed-out Session with an
  internal ``ses_`` ID, its ``sub`` (stored as the User ID) and ``agent_id``;
- later requests must carry the same ``sub`` and the same ``agent_id`` (or none when
  none was recorded), else ``mismatch`` (``invalid_session`` at the resource);
- an ended Session (dashboard revoke, agent blocked) is ``ended`` (``session_ended``);
- the grant family ``sgn`` of an access token is live only while its sign-in is not
  revoked and belongs to the same client; the pairing is recorded on the Session row so
  the dashboard shows which account a Session used, and revoking the family signs the
  row out like a 0.2 Session.

The create-or-read is one statement (``INSERT … ON CONFLICT DO NOTHING`` with the read
and the grant lookup beside it); only when a concurrent first sight of the same ``sid``
was still uncommitted does a second read follow, so two racing first requests agree on
one Session.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

from .replay_cache import ReplayCache

__all__ = [
    "SESSION_JTI_NAMESPACE",
    "DelegatedState",
    "LiveGrant",
    "SessionState",
    "claim_session_jti",
    "live_grant",
    "observe_delegated_session",
    "session_jti_claim",
]

SessionState = Literal["active", "ended", "mismatch"]

_TOUCH_S = 60
SESSION_JTI_NAMESPACE = "psj"
"""Replay-cache namespace of Session JWT ``jti`` values, scoped by ``client_id`` (ADR 0004 §3)."""

_OBSERVE = """
WITH ins AS (
    INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, profile, agent_sid,
                              agent_id)
    VALUES ($1, $2, $3, $4, $5, $5, '1.0', $6, $7)
    ON CONFLICT (tenant_id, client_id, agent_sid) WHERE profile = '1.0' DO NOTHING
    RETURNING id, user_id, agent_id, ended_at, last_used_at, sign_in_id
), cur AS (
    SELECT id, user_id, agent_id, ended_at, last_used_at, sign_in_id, true AS created FROM ins
    UNION ALL
    SELECT id, user_id, agent_id, ended_at, last_used_at, sign_in_id, false AS created FROM pap_sessions
     WHERE tenant_id = $1 AND client_id = $3 AND agent_sid = $6 AND profile = '1.0'
)
SELECT c.*, g.account_id AS grant_account, g.scope AS grant_scope
  FROM (SELECT * FROM cur LIMIT 1) c
  LEFT JOIN sign_ins g ON g.tenant_id = $1 AND g.id = $8 AND g.client_id = $3 AND g.profile = '1.0'
                      AND g.revoked_at IS NULL
"""

_READ = """
SELECT s.id, s.user_id, s.agent_id, s.ended_at, s.last_used_at, s.sign_in_id, false AS created,
       g.account_id AS grant_account, g.scope AS grant_scope
  FROM pap_sessions s
  LEFT JOIN sign_ins g ON g.tenant_id = $1 AND g.id = $4 AND g.client_id = $2 AND g.profile = '1.0'
                      AND g.revoked_at IS NULL
 WHERE s.tenant_id = $1 AND s.client_id = $2 AND s.agent_sid = $3 AND s.profile = '1.0'
"""


class DelegatedState(msgspec.Struct, frozen=True, kw_only=True):
    """What Frontdoor knows of one 1.0 request's Session and grant.

    Attributes:
        state: ``active``, ``ended`` or ``mismatch`` (``sub`` or ``agent_id`` changed).
        session_id: The internal ``ses_`` ID of the Session.
        created: Whether this call created the Session (first sight).
        signed_in: True only for an ``sgn`` that is live and belongs to this client.
        account: The account of that sign-in.
        scope: The sign-in's scope (an access token may carry a narrower one).
    """

    state: SessionState
    session_id: str
    created: bool = False
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None


async def observe_delegated_session(conn: asyncpg.Connection, tenant_id: str, *, client_id: str, sid: str, sub: str,
                                    agent_id: str | None, now: datetime, sgn: str | None = None,
                                    create: bool = True) -> DelegatedState:
    """Create the Session at first sight, or check it against what was recorded.

    Args:
        client_id: The agent (the Session JWT's verified ``iss``).
        sid: The agent's Session ID (already checked against ``^[A-Za-z0-9_-]{1,256}$``).
        sub: The Session's user (stored as its User ID).
        agent_id: The optional ``agent_id`` claim.
        sgn: The grant family of the access token sent with the request, if any.
        create: False when the tenant may not start new Sessions now: a known Session is
            still checked, an unknown one is not written.

    Raises:
        LookupError: No Session has this ``sid`` and ``create`` is False (nothing was
            written), or it vanished in between (its tenant removed).
    """
    row = None
    if create:
        row = await conn.fetchrow(_OBSERVE, tenant_id, new_id("ses"), client_id, sub, now, sid, agent_id, sgn)
    if row is None:  # not to create, or a concurrent first sight committed after the statement's snapshot
        row = await conn.fetchrow(_READ, tenant_id, client_id, sid, sgn)
    if row is None:  # the Session was deleted in between (tenant removed): nothing to vouch for
        raise LookupError("the Session vanished")
    if row["user_id"] != sub or row["agent_id"] != agent_id:
        return DelegatedState(state="mismatch", session_id=row["id"])
    if row["ended_at"] is not None:
        return DelegatedState(state="ended", session_id=row["id"])
    signed_in = sgn is not None and row["grant_account"] is not None
    await _record_use(conn, tenant_id, row, sgn=sgn if signed_in else None, account=row["grant_account"],
                      scope=row["grant_scope"], now=now)
    return DelegatedState(state="active", session_id=row["id"], created=row["created"], signed_in=signed_in,
                          account=row["grant_account"] if signed_in else None,
                          scope=row["grant_scope"] if signed_in else None)


async def _record_use(conn: asyncpg.Connection, tenant_id: str, row: asyncpg.Record, *, sgn: str | None,
                      account: str | None, scope: str | None, now: datetime) -> None:
    """Touch ``last_used_at`` about once a minute, and record a new sign-in pairing (one UPDATE, rarely)."""
    new_pairing = sgn is not None and row["sign_in_id"] != sgn
    stale = (now - row["last_used_at"]).total_seconds() >= _TOUCH_S
    if not (new_pairing or stale):
        return
    if new_pairing:
        await conn.execute(
            "UPDATE pap_sessions SET last_used_at = greatest(last_used_at, $3), signed_in_at = $3, account_id = $4,"
            " scope = $5, sign_in_id = $6, bound_account = coalesce(bound_account, $4)"
            " WHERE tenant_id = $1 AND id = $2 AND ended_at IS NULL",
            tenant_id, row["id"], now, account, scope, sgn,
        )
    else:
        await conn.execute(
            "UPDATE pap_sessions SET last_used_at = $3 WHERE tenant_id = $1 AND id = $2 AND last_used_at < $3",
            tenant_id, row["id"], now,
        )


class LiveGrant(msgspec.Struct, frozen=True, kw_only=True):
    """A live 1.0 sign-in (grant family)."""

    sign_in_id: str
    account: str
    scope: str


async def live_grant(conn: asyncpg.Connection, tenant_id: str, *, client_id: str, sgn: str) -> LiveGrant | None:
    """The 1.0 sign-in ``sgn`` when it is live and belongs to ``client_id``, else None."""
    row = await conn.fetchrow(
        "SELECT id, account_id, scope FROM sign_ins WHERE tenant_id = $1 AND id = $2 AND client_id = $3"
        " AND profile = '1.0' AND revoked_at IS NULL",
        tenant_id, sgn, client_id,
    )
    return None if row is None else LiveGrant(sign_in_id=row["id"], account=row["account_id"], scope=row["scope"])


def session_jti_claim(*, tenant_id: str, client_id: str, jti: str, iat: int, now: int, max_age: int = 60,
                      skew: int = 60) -> tuple[str, str, str, int]:
    """The ``(namespace, scope, value, ttl_s)`` claim of a Session JWT's ``jti`` (`claim_session_jti`).

    For a caller that claims it with others in one round trip (``ReplayCache.claim_all``).
    """
    return SESSION_JTI_NAMESPACE, f"{tenant_id}\x00{client_id}", jti, max(iat + max_age + skew - now, 1)


async def claim_session_jti(replay: ReplayCache, *, tenant_id: str, client_id: str, jti: str, iat: int, now: int,
                            max_age: int = 60, skew: int = 60) -> bool:
    """Claim a Session JWT's ``jti`` once per (tenant, ``client_id``) (ADR 0004 §3, [Q12]).

    The value is remembered for as long as a JWT with this ``iat`` can still be accepted
    (``iat + max_age`` plus the skew), never less than a second. False is a replay.

    Raises:
        Unavailable: Redis cannot answer (fail closed).
    """
    namespace, scope, value, ttl = session_jti_claim(tenant_id=tenant_id, client_id=client_id, jti=jti, iat=iat,
                                                     now=now, max_age=max_age, skew=skew)
    return await replay.claim(namespace, scope, value, ttl_s=ttl)
