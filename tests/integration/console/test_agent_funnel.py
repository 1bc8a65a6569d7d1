"""The agent funnel after a scripted set of agent journeys: the page, the CSV and the rollup
count exactly what the script did, per agent, on the right UTC day, for this tenant only."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from frontdoor_operations import ledger
from frontdoor_operations.funnel import materialise_closed_days
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_operation_pages import add_endpoint, add_kind, add_operation
from tests.support.clock import ShiftableClock


async def _session(db: Any, tenant_id: str, client_id: str, at: Any) -> None:
    await db.execute("INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
                     " VALUES ($1, $2, $3, 'user-1', $4, $4)", tenant_id, new_id("ses"), client_id, at)


async def _sign_in(db: Any, tenant_id: str, client_id: str, at: Any) -> None:
    await db.execute("INSERT INTO sign_ins (tenant_id, id, client_id, user_id, account_id, scope, type, created_at)"
                     " VALUES ($1, $2, $3, 'user-1', 'acct-1', 'poppy:read', 'device', $4)",
                     tenant_id, new_id("asn"), client_id, at)


NO_ATTEMPTS = {"prompted": "0", "abandoned_before_login": "0", "abandoned_login": "0", "abandoned_consent": "0",
               "abandoned_step_up": "0"}
"""Rows inserted here are no sign-in attempts (those are counted from real flows in test_agent_funnel_sign_ins)."""


def _row(page: str, agent: str) -> dict[str, str]:
    block = page[page.index(f'data-agent="{agent}"'):]
    block = block[:block.index("</tr>")]
    out = {}
    for part in block.split('data-count="')[1:]:
        name, _, rest = part.partition('">')
        out[name] = rest.split("<", 1)[0]
    return out


async def test_the_funnel_counts_a_scripted_set_of_journeys(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime,
    clock: ShiftableClock, db: Any,
) -> None:
    now = clock()
    days_ago_3 = now - timedelta(days=3)
    await db.execute("UPDATE tenants SET created_at = $2 WHERE id = $1", tenant.id, now - timedelta(days=10))
    alpha = f"https://{unique('alpha-')}.example/agent.json"
    beta = f"https://{unique('beta-')}.example/agent.json"
    kind = await add_kind(console, tenant, await add_endpoint(console, tenant))
    # Agent alpha, today: 3 Sessions, 2 sign-ins, 4 operations.
    for _ in range(3):
        await _session(db, tenant.id, alpha, now)
    for _ in range(2):
        await _sign_in(db, tenant.id, alpha, now)
    done = await add_operation(runtime, tenant.id, kind, client_id=alpha, confirm=True)       # performed
    revised = await add_operation(runtime, tenant.id, kind, client_id=alpha)                  # revised, re-approved, failed
    unknown = await add_operation(runtime, tenant.id, kind, client_id=alpha, confirm=True)    # outcome unknown
    await add_operation(runtime, tenant.id, kind, client_id=alpha)                            # proposed only
    async with runtime.pool.acquire() as conn:
        await ledger.record_outcome(conn, tenant.id, done.id, outcome="succeeded", result={"summary": "Ordered"}, now=now)
        r2 = await ledger.revise(conn, tenant.id, revised.id, summary="Now 40.00 EUR",
                                 terms={"total": {"amount": "40.00"}}, now=now)
        await ledger.confirm(conn, tenant.id, revised.id, revision=r2.revision, approved_by="user", via="agent", now=now)
        await ledger.record_outcome(conn, tenant.id, revised.id, outcome="failed", result={"summary": "Out of stock"}, now=now)
        await ledger.flag_attention(conn, tenant.id, unknown.id, "delivery_exhausted", now=now)
    # Agent beta, three days ago: 1 Session and 1 operation proposed.
    await _session(db, tenant.id, beta, days_ago_3)
    old = await add_operation(runtime, tenant.id, kind, client_id=beta)
    await db.execute("UPDATE operations SET created_at = $3 WHERE tenant_id = $1 AND id = $2", tenant.id, old.id, days_ago_3)
    await db.execute("UPDATE operation_revisions SET created_at = $3 WHERE tenant_id = $1 AND operation_id = $2",
                     tenant.id, old.id, days_ago_3)
    # Another tenant's journeys with the same agent count nowhere here.
    for _ in range(5):
        await _session(db, other_tenant.id, alpha, now)
        await _sign_in(db, other_tenant.id, alpha, now)

    expected_alpha = {"sessions": "3", "sign_ins": "2", "proposed": "4", "approved": "3", "performed": "1",
                      "failed": "1", "unknown": "1", "terms_changed_rate": "0.25", "reapproval_rate": "1.00", **NO_ATTEMPTS}
    expected_beta = {"sessions": "1", "sign_ins": "0", "proposed": "1", "approved": "0", "performed": "0",
                     "failed": "0", "unknown": "0", "terms_changed_rate": "0.00", "reapproval_rate": "–", **NO_ATTEMPTS}
    await sign_in(console, tenant.email)
    live = (await console.get("/analytics/funnel?days=7")).text  # nothing rolled up yet: all counted live
    assert _row(live, alpha) == expected_alpha
    assert _row(live, beta) == expected_beta
    assert _row(live, "total")["sessions"] == "4" and _row(live, "total")["proposed"] == "5"
    assert 'data-chart="funnel-sessions"' in live and "style=" not in live

    # The rollup writes the closed days once; the page then reads beta's day from it.
    written = await materialise_closed_days(runtime.pool, now=now)
    assert written >= 9
    assert await materialise_closed_days(runtime.pool, now=now) == 0
    rolled = await db.fetch("SELECT day, client_id, sessions, proposed FROM agent_funnel_daily WHERE tenant_id = $1",
                            tenant.id)
    assert [(r["day"], r["client_id"], r["sessions"], r["proposed"]) for r in rolled] == [(days_ago_3.date(), beta, 1, 1)]
    assert await db.fetchval("SELECT counted_through FROM agent_funnel_marks WHERE tenant_id = $1", tenant.id) \
        == (now - timedelta(minutes=5)).date() - timedelta(days=1)
    # Rows of a closed day are read from the rollup, not recounted.
    await db.execute("DELETE FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2", tenant.id, beta)
    page = (await console.get("/analytics/funnel?days=7")).text
    assert _row(page, alpha) == expected_alpha and _row(page, beta) == expected_beta
    # The period leaves beta's day out.
    one_day = (await console.get("/analytics/funnel?days=7".replace("7", "1"))).text
    assert _row(one_day, alpha)["sessions"] == "3" and f'data-agent="{beta}"' not in one_day

    r = await console.get("/analytics/funnel.csv?days=7")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = {row["client_id"]: row for row in csv.DictReader(io.StringIO(r.text))}
    assert set(rows) == {alpha, beta}
    assert rows[alpha] == {"client_id": alpha, "sessions": "3", "sign_ins": "2", "proposed": "4", "approved": "3",
                           "performed": "1", "failed": "1", "revised": "1", "reapproved": "1", "unknown": "1",
                           "terms_changed_rate": "0.25", "reapproval_rate": "1.00", **NO_ATTEMPTS}

    await sign_in(console, other_tenant.email)
    theirs = (await console.get("/analytics/funnel?days=7")).text
    assert _row(theirs, alpha)["sessions"] == "5" and _row(theirs, alpha)["proposed"] == "0"
    assert f'data-agent="{beta}"' not in theirs
