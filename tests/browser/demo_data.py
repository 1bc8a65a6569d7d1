"""A month of plausible traffic for one tenant, for the overview screenshot in the docs.

Written straight into the tables (what the issuer, the ledger and the dispatcher would have
written over 30 days): three agents, a few hundred Sessions, operations in every state, and
a webhook endpoint that has been failing for three days. Deterministic, so the picture only
changes when the page does. Used only with ``FRONTDOOR_DOCS_SCREENSHOT=1``.
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from frontdoor_core.ids import new_id

AGENTS = [("Pocket Assistant", "pocket"), ("Travel Buddy", "travel-buddy"), ("Shopping Copilot", "copilot")]


async def seed_demo_month(db: Any, tenant_id: str, now: datetime | None = None) -> None:
    now = now or datetime.now(UTC)
    rnd = random.Random(7)
    clients = []
    for name, host in AGENTS:
        client_id = f"https://{host}.example/agent.json"
        clients.append(client_id)
        await db.execute("INSERT INTO agents (tenant_id, client_id, client_name, first_seen_at, last_seen_at)"
                         " VALUES ($1, $2, $3, $4, $5)", tenant_id, client_id, name, now - timedelta(days=41),
                         now - timedelta(minutes=rnd.randint(1, 30)))

    def moment(days_ago: int) -> datetime:
        # a time on that day, never in the future
        return min(now - timedelta(days=days_ago, hours=rnd.uniform(0, 23)), now - timedelta(minutes=2))

    sessions, ops, messages, attempts = [], [], [], []
    for days_ago in range(29, -1, -1):
        weekday = (now - timedelta(days=days_ago)).weekday()
        trend = 1 + (29 - days_ago) / 40  # growing
        busy = (0.55 if weekday >= 5 else 1.0) * trend
        for _ in range(int(14 * busy + rnd.randint(0, 6))):
            created = moment(days_ago)
            used = min(created + timedelta(minutes=rnd.randint(1, 600)), now - timedelta(minutes=1))
            account = f"acct-{rnd.randint(1000, 1180)}" if rnd.random() < 0.6 else None
            sessions.append((tenant_id, new_id("ses"), rnd.choice(clients), f"user-{rnd.randint(1, 400)}", created,
                             used, used if account else None, account, account,
                             "poppy:read poppy:write" if account else None))
        for _ in range(int(6 * busy + rnd.randint(0, 4) + 3 * math.sin(days_ago / 3) + 2)):
            created = moment(days_ago)
            roll = rnd.random()
            state = ("succeeded" if roll < 0.72 else "failed" if roll < 0.8 else "cancelled" if roll < 0.88
                     else "expired")
            if days_ago == 0 and roll > 0.75:
                state = "proposed"
            ops.append((new_id("op"), tenant_id, rnd.choice(clients), f"user-{rnd.randint(1, 400)}", state, created))
    # The receiver has failed since three days ago: every perform attempt of those days fails.
    endpoint = new_id("whe")
    failing_since = now - timedelta(days=2, hours=20)
    await db.execute("INSERT INTO webhook_endpoints (tenant_id, id, url, description, event_types, failing_since,"
                     " created_at, updated_at) VALUES ($1, $2, 'https://orders.northwind.example/frontdoor/perform',"
                     " 'Order service', '{}', $3, $4, $4)", tenant_id, endpoint, failing_since, now - timedelta(days=40))
    await db.execute("INSERT INTO operation_kinds (tenant_id, name, description, scopes, default_expiry_seconds,"
                     " max_expiry_seconds, perform_endpoint_id, created_at, updated_at)"
                     " VALUES ($1, 'order.place', 'Place an order', '{orders:write}', 900, 3600, $2, $3, $3)",
                     tenant_id, endpoint, now - timedelta(days=40))
    rows = []
    for op_id, tid, client, user, state, created in ops:
        if created >= failing_since and state in ("succeeded", "failed"):
            state = "in_progress"  # the perform webhook has not got through yet
        confirmed = state in ("succeeded", "failed", "in_progress")
        attention = "delivery_exhausted" if state == "in_progress" and rnd.random() < 0.3 else None
        rows.append((op_id, tid, "order.place", client, user, new_id("ses"), state, created + timedelta(minutes=15),
                     created + timedelta(minutes=2) if confirmed else None, 1 if confirmed else None,
                     "user" if confirmed else None, "agent" if confirmed else None,
                     None if state in ("proposed", "in_progress") else json.dumps({"status": state}),
                     None if state in ("proposed", "in_progress") else created + timedelta(minutes=3),
                     attention, created, created))
        if confirmed:
            failed_tries = rnd.choice((0, 0, 0, 0, 1)) if created < failing_since else rnd.randint(2, 4)
            if failed_tries:
                message = new_id("msg")
                messages.append((tid, message, endpoint, "operation.perform", "{}", "perform", op_id,
                                 "delivered" if state != "in_progress" else "exhausted" if attention else "pending",
                                 failed_tries, created))
                for n in range(failed_tries):
                    at = min(created + timedelta(minutes=2 + 5 * n), now - timedelta(minutes=1))
                    attempts.append((tid, new_id("att"), message, endpoint, n + 1,
                                     "https://orders.northwind.example/frontdoor/perform", at, 30000, None,
                                     "timeout", "", "{}"))
    await db.executemany(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, signed_in_at,"
        " account_id, bound_account, scope) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", sessions)
    await db.executemany(
        "INSERT INTO operations (id, tenant_id, kind, client_id, user_id, session_id, state, revision, expires_at,"
        " confirmed_at, confirmed_revision, approved_by, confirmed_via, result, finished_at, attention, created_at,"
        " updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16, $17)", rows)
    await db.executemany(
        "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, operation_id, state,"
        " attempts, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", messages)
    await db.executemany(
        "INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at, duration_ms,"
        " response_status, error_class, response_excerpt, request_headers)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb)", attempts)
