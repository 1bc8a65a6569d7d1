"""After a busy run at the issuer (several agents, users, renewals, sign-ins), the metering
counts (the dashboard's month so far, and the closed day counted for Stripe) equal what the
issuer itself answered and counted: new Sessions issued, distinct agents, distinct accounts
signed in. Renewals are not new Sessions; another tenant's traffic is not counted."""

from __future__ import annotations

from typing import Any

from frontdoor_billing import BillingConfig, count_closed_days
from frontdoor_core.metrics import TOKEN_GRANTS, grant_type_label
from frontdoor_sessions import JWT_BEARER, DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.conftest import sign_up
from tests.integration.signin.conftest import make_company, new_agent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


def _issued() -> float:
    return float(TOKEN_GRANTS.labels(grant_type_label(JWT_BEARER), "issued")._value.get())


async def test_metering_equals_the_issuers_counts_after_a_busy_run(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any,
        web: MockWeb, db: Any) -> None:
    store = DeviceStore(runtime.redis, clock=clock)
    t = await sign_up(console)
    noise = await make_company(console, issuer, await sign_up(console), clock, store)
    company = await make_company(console, issuer, t, clock, store)
    agents = [new_agent(web) for _ in range(4)]
    issued_before = _issued()
    new_sessions: list[tuple[int, str]] = []
    for i, agent in enumerate(agents):
        for u in range(3 + i % 2):  # 3 or 4 users per agent
            body = await company.session(agent, f"user-{u}")
            new_sessions.append((i, body["session_id"]))
    renewals = 0
    for i, sid in new_sessions[::2]:
        user = f"user-{[s for j, s in new_sessions if j == i].index(sid)}"
        assert (await company.session(agents[i], user, session_id=sid))["session_id"] == sid
        renewals += 1
    accounts = ["acct-1", "acct-2", "acct-3"]
    for n, account in enumerate([*accounts, "acct-1"]):  # acct-1 signs in twice: one active user
        i, sid = new_sessions[n]
        user = f"user-{[s for j, s in new_sessions if j == i].index(sid)}"
        await company.sign_in(agents[i], user, account, session_id=sid)
    await noise.session(agents[0], "someone")  # another tenant's Session
    issuer_new = _issued() - issued_before - renewals - 1  # the issuer's own counter, less renewals and noise
    assert issuer_new == len(new_sessions)

    usage = (await console.get("/api/v1/billing", headers=t.auth)).json()["usage"]
    assert usage["sessions"]["used"] == len(new_sessions)
    assert usage["active_agents"]["used"] == len(agents)
    assert usage["active_users"]["used"] == len(accounts)
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1", t.id) == len(new_sessions)

    # the day closes: the counted day equals the same numbers (what would be reported to Stripe)
    day = clock().date()
    clock.advance(days=1, minutes=20)
    await count_closed_days(runtime.pool, BillingConfig.from_settings(runtime.settings).catalogue, now=clock(),
                            billed=False)
    rows = {r["metric"]: r["value"] for r in await db.fetch(
        "SELECT metric, value FROM billing_usage_daily WHERE tenant_id = $1 AND day = $2", t.id, day)}
    assert rows == {"sessions": len(new_sessions), "active_agents": len(agents), "active_users": len(accounts),
                    "operations": 0, "webhook_deliveries": 0}
