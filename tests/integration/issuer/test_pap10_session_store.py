"""The 1.0 Session store against PostgreSQL and Redis (ADR 0004 §5, [S §3]): first sight,
same sid under another sub, ended Sessions, races of two first sights, the grant family
check and its revocation, the jti replay claim; and the two-tenant matrix."""

from __future__ import annotations

import asyncio
from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_sessions import ReplayCache, revoke_sign_ins
from frontdoor_sessions.delegated_sessions import claim_session_jti, live_grant, observe_delegated_session
from frontdoor_sessions.sign_in import complete_delegated_sign_in

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import configure
from tests.support.clock import ShiftableClock


async def test_first_sight_creates_a_signed_out_session_and_later_sights_check_it(
    db: Any, tenant: TenantHandle, clock: ShiftableClock,
) -> None:
    agent, sid = f"https://{unique('a-')}.example/agent.json", unique("sid-")
    first = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id="car-1",
                                            now=clock())
    assert first.state == "active" and first.created and not first.signed_in and first.session_id.startswith("ses_")
    row = await db.fetchrow("SELECT * FROM pap_sessions WHERE tenant_id = $1 AND id = $2", tenant.id, first.session_id)
    assert (row["profile"], row["agent_sid"], row["agent_id"], row["user_id"]) == ("1.0", sid, "car-1", "alice")
    assert row["signed_in_at"] is None and row["ended_at"] is None
    again = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id="car-1",
                                            now=clock())
    assert again.state == "active" and not again.created and again.session_id == first.session_id
    # [S §3]: the same sid with another sub or agent_id (or none where one was recorded) is refused.
    for sub, agent_id in (("mallory", "car-1"), ("alice", "car-2"), ("alice", None)):
        other = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub=sub, agent_id=agent_id,
                                                now=clock())
        assert other.state == "mismatch" and other.session_id == first.session_id
    # Another client with the same sid is another Session.
    theirs = await observe_delegated_session(db, tenant.id, client_id=agent + "x", sid=sid, sub="bob", agent_id=None,
                                             now=clock())
    assert theirs.state == "active" and theirs.session_id != first.session_id
    await db.execute("UPDATE pap_sessions SET ended_at = now(), end_reason = 'revoked' WHERE tenant_id = $1 AND id = $2",
                     tenant.id, first.session_id)
    ended = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id="car-1",
                                            now=clock())
    assert ended.state == "ended" and ended.session_id == first.session_id


async def test_racing_first_sights_agree_on_one_session(runtime: Runtime, tenant: TenantHandle,
                                                        clock: ShiftableClock) -> None:
    agent, sid = f"https://{unique('a-')}.example/agent.json", unique("sid-")

    async def sight() -> Any:
        async with runtime.pool.acquire() as conn, conn.transaction():
            state = await observe_delegated_session(conn, tenant.id, client_id=agent, sid=sid, sub="alice",
                                                    agent_id=None, now=clock())
            await asyncio.sleep(0.05)  # hold the row uncommitted while the other inserts
            return state

    states = await asyncio.gather(*(sight() for _ in range(6)))
    assert {s.state for s in states} == {"active"}
    assert len({s.session_id for s in states}) == 1 and sum(s.created for s in states) == 1
    async with runtime.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND agent_sid = $2",
                                   tenant.id, sid) == 1


async def test_grant_family_is_live_until_revoked_and_pairs_the_session(
    console: Any, db: Any, tenant: TenantHandle, clock: ShiftableClock,
) -> None:
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read", "poppy:write"]})
    agent, sid = f"https://{unique('a-')}.example/agent.json", unique("sid-")
    done = await complete_delegated_sign_in(db, tenant_id=tenant.id, client_id=agent, account_id="acct-1",
                                            granted_scope="poppy:read", sign_in_type="device", now=clock())
    row = await db.fetchrow("SELECT user_id, profile FROM sign_ins WHERE tenant_id = $1 AND id = $2", tenant.id,
                            done.sign_in_id)
    assert row["user_id"] is None and row["profile"] == "1.0"
    state = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id=None,
                                            now=clock(), sgn=done.sign_in_id)
    assert state.signed_in and state.account == "acct-1" and state.scope == "poppy:read"
    session = await db.fetchrow("SELECT account_id, sign_in_id FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                                tenant.id, state.session_id)
    assert (session["account_id"], session["sign_in_id"]) == ("acct-1", done.sign_in_id)
    # Another client presenting this family's sgn is not signed in.
    other = await observe_delegated_session(db, tenant.id, client_id=agent + "x", sid=sid, sub="alice", agent_id=None,
                                            now=clock(), sgn=done.sign_in_id)
    assert other.state == "active" and not other.signed_in
    assert await live_grant(db, tenant.id, client_id=agent + "x", sgn=done.sign_in_id) is None
    async with db.transaction():
        await revoke_sign_ins(db, tenant.id, [done.sign_in_id], now=clock(), reason="disconnected")
    after = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id=None,
                                            now=clock(), sgn=done.sign_in_id)
    assert after.state == "active" and not after.signed_in and after.account is None  # [S §5]: continues signed out
    assert await db.fetchval("SELECT signed_in_at FROM pap_sessions WHERE tenant_id = $1 AND id = $2", tenant.id,
                             state.session_id) is None


async def test_made_under_a_invisible_under_b(db: Any, tenant: TenantHandle, other_tenant: TenantHandle,
                                             console: Any, clock: ShiftableClock) -> None:
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read"]})
    agent, sid = f"https://{unique('a-')}.example/agent.json", unique("sid-")
    a = await observe_delegated_session(db, tenant.id, client_id=agent, sid=sid, sub="alice", agent_id=None,
                                        now=clock())
    done = await complete_delegated_sign_in(db, tenant_id=tenant.id, client_id=agent, account_id="acct-1",
                                            granted_scope="poppy:read", sign_in_type="device", now=clock())
    await db.execute("UPDATE pap_sessions SET ended_at = now() WHERE tenant_id = $1 AND id = $2", tenant.id,
                     a.session_id)
    # Under B the same (client, sid) is a fresh Session, and A's sign-in is unknown.
    b = await observe_delegated_session(db, other_tenant.id, client_id=agent, sid=sid, sub="mallory", agent_id=None,
                                        now=clock(), sgn=done.sign_in_id)
    assert b.state == "active" and b.created and b.session_id != a.session_id and not b.signed_in
    assert await live_grant(db, other_tenant.id, client_id=agent, sgn=done.sign_in_id) is None
    async with db.transaction():
        assert (await revoke_sign_ins(db, other_tenant.id, [done.sign_in_id], now=clock(),
                                      reason="disconnected")).sign_ins_revoked == 0
    assert await live_grant(db, tenant.id, client_id=agent, sgn=done.sign_in_id) is not None


async def test_session_jti_is_claimed_once_per_client_and_tenant(runtime: Runtime, clock: ShiftableClock) -> None:
    replay = ReplayCache(runtime.redis)
    now = int(clock().timestamp())
    jti, agent = unique("jti-"), "https://agent.example/a.json"
    assert await claim_session_jti(replay, tenant_id="ten_a", client_id=agent, jti=jti, iat=now, now=now)
    assert not await claim_session_jti(replay, tenant_id="ten_a", client_id=agent, jti=jti, iat=now, now=now)
    assert await claim_session_jti(replay, tenant_id="ten_a", client_id=agent + "x", jti=jti, iat=now, now=now)
    assert await claim_session_jti(replay, tenant_id="ten_b", client_id=agent, jti=jti, iat=now, now=now)
    ttl = await runtime.redis.ttl(replay._key("psj", f"ten_a\x00{agent}", jti))
    assert 100 < ttl <= 120  # the iat window (60 s) plus the skew (60 s)
