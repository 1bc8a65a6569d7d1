"""A relay answer the §7 checks would accept but PostgreSQL cannot store (a NUL character, which
jsonb refuses) fails its attempt (``invalid_response``) and queues the conversation for a
person. Before: the attempt's settle rolled back every time, so the relay stayed pending and
unsettled, the agent read ``working`` and any deliverer sent it to the company again after
every lease, forever."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.conftest import TenantHandle
from tests.integration.ledger.test_conversation_relay import RelayDesk, _token, agent, desk  # noqa: F401 - fixtures
from tests.support.agent import TestAgent

_ANSWERS = {
    "text": b'{"messages": [{"text": "nul \\u0000 here"}]}',
    "data key": b'{"messages": [{"data": {"a\\u0000": 1}}]}',
    "data value": b'{"messages": [{"data": {"a": ["x", "\\u0000"]}}]}',
    "authorization scope": b'{"messages": [{"text": "Sign in"}], "events": [{"type": "authorization",'
                           b' "scope": "orders\\u0000"}]}',
}



@pytest.mark.parametrize("body", list(_ANSWERS.values()), ids=list(_ANSWERS))
async def test_a_relay_answer_postgres_cannot_store_fails_its_attempt(desk: RelayDesk, agent: TestAgent,  # noqa: F811
                                                                      runtime: Any, tenant: TenantHandle,
                                                                      body: bytes) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(200, content=body,
                                                          headers={"content-type": "application/json"})
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "queued", r.text  # a person is asked for, at once
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT m.state, m.locked_until, array(SELECT a.error_class FROM webhook_attempts a"
            " WHERE a.tenant_id = m.tenant_id AND a.message_id = m.id) AS errors"
            " FROM webhook_messages m WHERE m.tenant_id = $1 AND m.purpose = 'relay'", tenant.id)
        events = await conn.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1"
                                     " AND type IN ('authorization') OR (tenant_id = $1 AND type = 'message'"
                                     " AND payload->'message'->>'role' = 'company')", tenant.id)
    # settled: the one attempt is recorded and nothing is re-sent after the lease
    assert (row["state"], list(row["errors"])) == ("exhausted", ["invalid_response"]), dict(row)
    assert events == 0  # nothing of the answer was recorded
    assert len(desk.endpoint.requests) == 1
