"""The independent peer suite (personal-agent-protocol 0.26.0) against Frontdoor.

Twice: with the tenant's sign-in through Northwind's signed login handoff, and through an
OpenID Connect connection to a real OpenID Provider (npm ``oidc-provider`` on loopback,
started once per context), where the driver's user logs in at the IdP's own pages.

Every selected case must pass. A case may be skipped only when it needs a capability a
later issue brings, and the harness names that issue; any other skip fails the test,
so a skip is never counted as a pass.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from personal_agent_protocol.conformance import ConformanceContext, run_conformance, select_cases

from tests.conformance.harness import FrontdoorDriver, build_context

pytestmark = pytest.mark.conformance

#: Cases that may skip because they need what a later issue brings, and that issue. None today:
#: every case of every suite runs and passes.
EXPECTED_SKIPS: dict[str, str] = {}


@pytest.fixture(scope="module", params=["handoff", "oidc"])
async def context(request: pytest.FixtureRequest) -> AsyncIterator[ConformanceContext]:
    # The apps' lifespans (anyio task groups inside) must be entered and exited by one
    # task; pytest runs a fixture's setup and teardown in different tasks, so a
    # dedicated task owns the context for the module's lifetime.
    ready: asyncio.Future[ConformanceContext] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def own() -> None:
        try:
            async with build_context(suites=("security", "protocol", "lifecycle", "operations"),
                                     login=request.param) as ctx:
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


def _verdict(report: Any) -> tuple[list[str], list[str]]:
    failed = [f"{r.id}: {r.message}" for r in report.results if r.outcome == "failed"]
    unexpected_skips = [f"{r.id}: {r.message}" for r in report.results
                        if r.outcome == "skipped" and r.id not in EXPECTED_SKIPS]
    return failed, unexpected_skips


@pytest.mark.parametrize("suite", ["security", "protocol", "lifecycle", "operations"])
async def test_suite(context: ConformanceContext, suite: str) -> None:
    cases = select_cases(suites=[suite])
    assert cases, f"the {suite} suite selected no case"
    driver = context.driver
    assert isinstance(driver, FrontdoorDriver)
    logins_before = driver.idp_logins
    report = await run_conformance(context, cases=cases)
    failed, unexpected = _verdict(report)
    assert not failed, "failed cases:\n" + "\n".join(failed)
    assert not unexpected, "skipped without a named issue:\n" + "\n".join(unexpected)
    passed = sum(r.outcome == "passed" for r in report.results)
    skipped = {r.id for r in report.results if r.outcome == "skipped"}
    assert skipped <= set(EXPECTED_SKIPS)
    assert passed + len(skipped) == len(cases)
    awaiting = ", ".join(sorted({EXPECTED_SKIPS[s] for s in skipped}))
    idp_logins = driver.idp_logins - logins_before
    if driver.login == "oidc" and suite in ("protocol", "lifecycle"):
        # Their sign-in cases signed users in, each at the IdP's pages (the driver refuses any other).
        assert idp_logins > 0, f"the {suite} suite signed nobody in at the IdP"
    print(f"\n{suite} ({driver.login}, {idp_logins} IdP logins): {passed} passed" + (f", {len(skipped)} skipped awaiting {awaiting}" if skipped else ""))

