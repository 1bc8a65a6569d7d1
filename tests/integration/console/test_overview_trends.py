"""The overview's 24 h / 30 d Session figures and its 30-day charts, from real rows.

Sessions, operations and failed webhook attempts are placed on known days (their
timestamps moved back after they were made the ordinary way); the page must count each
on its UTC day, leave out what is older than 30 days and everything of another tenant,
and draw the charts as accessible inline SVG without a style attribute or a script.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any

from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_operation_pages import (
    ScriptedSender,
    add_endpoint,
    add_kind,
    add_operation,
    deliver_once,
)
from tests.support.clock import ShiftableClock


async def _session(db: Any, tenant_id: str, created: datetime, *, used: datetime | None = None,
                   account: str | None = None) -> None:
    await db.execute(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, bound_account)"
        " VALUES ($1, $2, 'https://agent.example/agent.json', 'user-1', $3, $4, $5)",
        tenant_id, new_id("ses"), created, used or created, account)


def _bar(page: str, chart: str, day: date) -> int:
    block = page[page.index(f'data-chart="{chart}"'):]
    m = re.search(rf'data-day="{day.isoformat()}" data-total="(\d+)"', block)
    assert m is not None, (chart, day)
    return int(m.group(1))


async def test_overview_counts_sessions_users_and_draws_30_days(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime,
    clock: ShiftableClock, db: Any,
) -> None:
    now = clock()
    hour, day = timedelta(hours=1), timedelta(days=1)
    # Sessions: 2 in the last 24 h (one signed in to acct-a), 3 more within 30 days (acct-a
    # again, acct-b), one 40 days old but used today (counts as a user, not as started),
    # one 40 days old and idle since; another tenant's Sessions count nowhere.
    placed = [now - hour, now - 2 * hour, now - 3 * day, now - 3 * day, now - 20 * day]
    await _session(db, tenant.id, placed[0], account="acct-a")
    await _session(db, tenant.id, placed[1])
    await _session(db, tenant.id, placed[2], account="acct-a")
    await _session(db, tenant.id, placed[3], account="acct-b")
    await _session(db, tenant.id, placed[4], account="acct-c")
    await _session(db, tenant.id, now - 40 * day, used=now - hour, account="acct-d")
    await _session(db, tenant.id, now - 40 * day, account="acct-e")
    for _ in range(3):
        await _session(db, other_tenant.id, now - hour, account="theirs")

    # Operations: two today (one fails its perform attempt), one 5 days ago still proposed.
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    await add_operation(runtime, tenant.id, kind)
    running = await add_operation(runtime, tenant.id, kind, confirm=True)
    assert running.perform_message_id is not None
    await deliver_once(runtime, running.perform_message_id, ScriptedSender((503, b"down")), 0, 5, 5, 5)
    old = await add_operation(runtime, tenant.id, kind)
    await db.execute("UPDATE operations SET created_at = $3 WHERE tenant_id = $1 AND id = $2",
                     tenant.id, old.id, now - 5 * day)
    # Two more failed attempts: one moved 5 days back, one 45 days back (out of the window).
    for _ in range(2):
        clock.advance(seconds=6)
        await deliver_once(runtime, running.perform_message_id, ScriptedSender((500, b"boom")), 0, 5, 5, 5)
    attempts = await db.fetch("SELECT id FROM webhook_attempts WHERE tenant_id = $1 ORDER BY started_at", tenant.id)
    assert len(attempts) == 3
    for attempt, back in zip(attempts[1:], (5 * day, 45 * day), strict=True):
        await db.execute("UPDATE webhook_attempts SET started_at = $3 WHERE tenant_id = $1 AND id = $2",
                         tenant.id, attempt["id"], now - back)
    theirs = await add_kind(console, other_tenant, await add_endpoint(console, other_tenant))
    await add_operation(runtime, other_tenant.id, theirs)

    await sign_in(console, tenant.email)
    page = (await console.get("/")).text
    assert 'data-count="sessions-started">2<' in page
    assert 'data-count="sessions-started-30d">5<' in page
    assert 'data-count="signed-in-users-24h">2<' in page  # acct-a and acct-d
    assert 'data-count="signed-in-users-30d">4<' in page  # a, b, c, d; not e (idle 40 days)

    started = Counter(t.astimezone(UTC).date() for t in placed)
    for d, n in started.items():
        assert _bar(page, "sessions", d) == n
    assert 'data-count="chart-sessions-total">5<' in page
    today = now.astimezone(UTC).date()
    assert _bar(page, "operations", today) == 2
    assert _bar(page, "operations", (now - 5 * day).astimezone(UTC).date()) == 1
    assert 'data-count="chart-operations-total">3<' in page
    assert _bar(page, "failed-attempts", today) == 1
    assert _bar(page, "failed-attempts", (now - 5 * day).astimezone(UTC).date()) == 1
    assert 'data-count="attempts-failed-24h">1<' in page and 'data-count="chart-failed-attempts-total">2<' in page

    # Accessible and CSP-safe: titled, described, numbers in a table; no inline style or script.
    for chart in ("sessions", "operations", "failed-attempts"):
        assert f'aria-labelledby="chart-{chart}-title chart-{chart}-desc"' in page
        assert f'<title id="chart-{chart}-title">' in page and f'<desc id="chart-{chart}-desc">' in page
    assert page.count('<div class="visually-hidden"><table>') == 3
    assert page.count('<g class="chart-bar"') == 90
    assert "succeeded 0, failed 0, open, cancelled or expired 1" in page
    assert "style=" not in page and "<script>" not in page
    console.cookies.clear()


async def test_overview_charts_of_a_new_tenant_are_empty(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    await sign_in(console, tenant.email)
    page = (await console.get("/")).text
    assert 'data-count="chart-sessions-total">0<' in page and "No Sessions started from" in page
    assert 'data-count="signed-in-users-30d">0<' in page
    assert 'data-total="1"' not in page
    console.cookies.clear()
