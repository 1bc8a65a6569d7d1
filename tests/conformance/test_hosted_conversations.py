"""The peer suite's conversations cases against Northwind through Frontdoor's hosted endpoint (PAP §7).

The tenant enables hosted conversations: its ``poppy.json`` lists ``{ledger}/{slug}/conversations``
and Northwind's concierge (examples/northwind, ``northwind.concierge``) answers through the
``conversation.message.created`` webhook and the sdk's ``FrontdoorConversations``. Every case
must pass; none may skip.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from personal_agent_protocol.conformance import ConformanceContext, run_conformance, select_cases

from tests.conformance.harness import LEDGER_HOST, build_context

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
async def context() -> AsyncIterator[ConformanceContext]:
    ready: asyncio.Future[ConformanceContext] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def own() -> None:  # one task enters and exits the apps' lifespans (see test_suites)
        try:
            async with build_context(suites=("conversations",)) as ctx:
                ready.set_result(ctx)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    owner = asyncio.create_task(own())
    try:
        yield await ready
    finally:
        done.set()
        await owner


async def test_the_endpoint_is_frontdoors(context: ConformanceContext) -> None:
    endpoint = await context.conversations_endpoint()
    assert endpoint.startswith(f"https://{LEDGER_HOST}/") and endpoint.endswith("/conversations")
    gone = await context.http.post(f"{context.base_url}/poppy/conversations", json={})
    assert gone.status_code == 404  # Northwind's own endpoint is retired


async def test_conversations_suite(context: ConformanceContext) -> None:
    cases = select_cases(suites=["conversations"])
    assert len(cases) == 18, [c.id for c in cases]
    report = await run_conformance(context, cases=cases)
    outcomes = {r.id: (r.outcome, r.message) for r in report.results}
    failed = [f"{k}: {m}" for k, (o, m) in outcomes.items() if o != "passed"]
    passed = sum(o == "passed" for o, _ in outcomes.values())
    print(f"\nconversations (hosted): {passed} passed of {len(cases)}")
    assert not failed, "not passed (failed or skipped):\n" + "\n".join(failed)
