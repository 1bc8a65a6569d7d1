"""The agent simulator is left out of the agent funnel and of metered usage, and marked as
the simulator in every list of agents (issue #19 §1: "excluded from metering and analytics").

One tenant, one real agent Session and one simulator Session, both started over the wire
at the issuer: the funnel (live, after the rollup, the CSV) and the usage billing counts
(``GET /api/v1/billing``) count 1; the agents page and the Sessions list show the badge on
the simulator only (the Operations and Feedback lists too). Sign-ins and operations under the
simulator's client_id are left out too.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from frontdoor_operations.funnel import materialise_closed_days
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_agent_funnel import _row
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_operation_pages import add_endpoint, add_kind, add_operation
from tests.integration.console.test_simulator import CONSOLE, run, steps, wire
from tests.integration.issuer.test_browser_verify import start_session
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb


def _badged(page: str, client_id: str) -> bool:
    """Whether the table row naming ``client_id`` carries the simulator badge."""
    at = page.index(f"<code class=\"small\">{client_id}</code>")
    row = page[page.rindex("<tr", 0, at):page.index("</tr>", at)]
    return "data-simulator" in row


async def test_the_simulator_counts_nowhere_and_is_marked_in_the_lists(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    runtime: Runtime, clock: ShiftableClock, db: Any,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    await wire(web, console, issuer, tenant)
    ran = await run(console, tenant)
    assert steps(ran.text)["session"] == "yes", ran.text
    simulator = f"{CONSOLE}/simulator/{tenant.slug}/agent.json"
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    await start_session(issuer, tenant, agent, "user-real")
    sessions = {r["client_id"] for r in await db.fetch("SELECT client_id FROM pap_sessions WHERE tenant_id = $1",
                                                        tenant.id)}
    assert sessions == {simulator, agent.client_id}  # both Sessions exist: only one may be counted
    # Sign-ins and operations under the simulator's client_id count nowhere either.
    kind = await add_kind(console, tenant, await add_endpoint(console, tenant))
    await add_operation(runtime, tenant.id, kind, client_id=simulator, confirm=True)
    await add_operation(runtime, tenant.id, kind, client_id=agent.client_id)
    for client in (simulator, agent.client_id):
        await db.execute("INSERT INTO sign_ins (tenant_id, id, client_id, user_id, account_id, scope, type, created_at)"
                         " VALUES ($1, $2, $3, 'user-1', $4, 'poppy:read', 'device', $5)",
                         tenant.id, new_id("asn"), client, f"acct-{client[-20:]}", clock())

    await sign_in(console, tenant.email)
    live = (await console.get("/analytics/funnel?days=7")).text
    assert f'data-agent="{simulator}"' not in live
    assert _row(live, agent.client_id)["sessions"] == "1"
    total = _row(live, "total")
    assert (total["sessions"], total["sign_ins"], total["proposed"], total["approved"]) == ("1", "1", "1", "0")
    exported = (await console.get("/analytics/funnel.csv?days=7")).text
    assert {r["client_id"] for r in csv.DictReader(io.StringIO(exported))} == {agent.client_id}

    usage = (await console.get("/api/v1/billing", headers=tenant.auth)).json()["usage"]
    assert {m: usage[m]["used"] for m in ("sessions", "operations", "active_agents", "active_users")} == {
        "sessions": 1, "operations": 1, "active_agents": 1, "active_users": 1}

    # The rollup (closed days) leaves the simulator out as well.
    await db.execute("UPDATE tenants SET created_at = $2 WHERE id = $1", tenant.id, clock() - timedelta(days=10))
    for table in ("pap_sessions", "sign_ins", "operations"):
        await db.execute(f"UPDATE {table} SET created_at = created_at - interval '2 days' WHERE tenant_id = $1",
                         tenant.id)
    await db.execute("UPDATE operations SET confirmed_at = confirmed_at - interval '2 days' WHERE tenant_id = $1",
                     tenant.id)
    assert await materialise_closed_days(runtime.pool, now=clock()) >= 1
    rolled = await db.fetch("SELECT client_id, sessions, sign_ins, proposed FROM agent_funnel_daily"
                            " WHERE tenant_id = $1", tenant.id)
    assert [(r["client_id"], r["sessions"], r["sign_ins"], r["proposed"]) for r in rolled] == [
        (agent.client_id, 1, 1, 1)]
    page = (await console.get("/analytics/funnel?days=7")).text
    assert f'data-agent="{simulator}"' not in page and _row(page, "total")["sessions"] == "1"

    # Every list of agents marks the simulator, and only the simulator.
    agents = (await console.get("/agents")).text
    assert _badged(agents, simulator) and not _badged(agents, agent.client_id)
    listed = (await console.get("/sessions")).text
    assert _badged(listed, simulator) and not _badged(listed, agent.client_id)
    operations = (await console.get("/operations")).text
    assert _badged(operations, simulator) and not _badged(operations, agent.client_id)
    session_id = await db.fetchval("SELECT id FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2",
                                   tenant.id, simulator)
    await db.execute("INSERT INTO feedback (tenant_id, id, session_id, client_id, user_id, kind, body)"
                     " VALUES ($1, $2, $3, $4, 'u', 'other', $5)", tenant.id, new_id("evt"), session_id, simulator,
                     {"task": "simulator check", "description": "a report under the simulator's client_id"})
    feedback = (await console.get("/feedback")).text
    assert _badged(feedback, simulator)
