"""Property-based fuzzing of the ledger (schemathesis), from its served, generated OpenAPI.

Every operation of ``/openapi.json`` gets generated requests, schema-valid and not, with a
fixed seed, and with a real operation ID and the tenant's slug offered beside generated
ones. The company's ledger API is called with the tenant's resource-server credential; the
agents' endpoints with a DPoP-bound Session Token and a fresh proof for the very URL sent.
Checks: no 5xx, only declared statuses and media types (``application/problem+json`` on
``/v1``, the protocol's JSON elsewhere), bodies matching the declared schemas.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER, make_shop
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

schemathesis = pytest.importorskip("schemathesis")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.core.failures import FailureGroup  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

MAX_EXAMPLES = 12  # x 22 operations x 3 strategies: bounded (well under a minute on 2 cores)
# Bounded by MAX_EXAMPLES, not by a clock; pytest-timeout's default is tight on a loaded machine.
pytestmark = pytest.mark.timeout(600)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


async def test_the_ledger_api_survives_fuzzing(console: Any, issuer: Any, ledger: Any, tenant: TenantHandle,
                                              clock: ShiftableClock, store: Any, web: MockWeb,
                                              agent: TestAgent) -> None:
    # Hosted conversations on, so their routes are fuzzed past "not enabled".
    shop = await make_shop(console, issuer, ledger, tenant, clock, store, web, conversations={"enabled": True})
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    proposed = await shop.propose(tokens, agent, user)
    url = f"{LEDGER}/{shop.tenant.slug}/conversations"
    token = tokens["access_token"]
    started = await shop.ledger.post(url, json={"message": {"id": unique("msg_"), "sender": "agent", "text": "Hello"}}, headers={
        "Authorization": f"DPoP {token}", "DPoP": agent.dpop("POST", url, token=token, iat=shop.now())})
    assert started.status_code == 201, started.text
    real = {"slug": shop.tenant.slug, "operation_id": proposed.json()["operation"]["operation_id"],
            "conversation_id": started.json()["conversation_id"]}
    spec = (await shop.ledger.get("/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(spec)
    loop = asyncio.get_running_loop()
    failures: dict[tuple[str, int], str] = {}
    seen: dict[str, set[int]] = {}

    async def send(case: Any) -> Any:
        company = "/v1/" in case.operation.path
        kwargs = case.as_transport_kwargs(base_url=LEDGER, headers=shop.api if company else {})
        request = {k: kwargs[k] for k in ("method", "url", "headers", "params", "cookies") if kwargs.get(k)}
        if "json" in kwargs:
            request["json"] = kwargs["json"]
        elif kwargs.get("data") is not None:
            request["content"] = kwargs["data"]
        built = shop.ledger.build_request(**request)
        if not company:  # the agent's proof names the URL as sent, percent-encoding and all
            htu = str(built.url.copy_with(query=None))
            built.headers["Authorization"] = f"DPoP {token}"
            built.headers["DPoP"] = agent.dpop(built.method, htu, token=token, iat=shop.now())
        return await shop.ledger.send(built)

    def call(case: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(send(case), loop).result(timeout=30)

    def fuzz(operation: Any) -> None:
        label = operation.label
        names = {p["name"] for p in operation.definition.raw.get("parameters", []) if p.get("in") == "path"}
        names |= {p["name"] for p in spec["paths"][operation.path].get("parameters", []) if p.get("in") == "path"}
        fixed = {n: real[n] for n in names if n in real}
        strategy = st.one_of(
            operation.as_strategy(generation_mode=GenerationMode.POSITIVE, path_parameters=fixed),
            operation.as_strategy(generation_mode=GenerationMode.NEGATIVE, path_parameters=fixed),
            operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

        @settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def run(case: Any) -> None:
            response = call(case)
            seen.setdefault(label, set()).add(response.status_code)
            try:
                case.validate_response(response, checks=CHECKS)
            except FailureGroup as exc:
                failures.setdefault((label, response.status_code),
                                    f"{label} -> {response.status_code}\n{exc}\n{response.text[:500]}")

        run()

    def fuzz_all() -> None:
        for result in schema.get_all_operations():
            at = time.monotonic()
            fuzz(result.ok())
            print(f"  {result.ok().label}: {time.monotonic() - at:.1f}s", flush=True)

    started = time.monotonic()
    await asyncio.to_thread(fuzz_all)
    elapsed = time.monotonic() - started
    print(f"ledger fuzz: {elapsed:.1f}s")
    print("ledger fuzz statuses:", {k: sorted(v) for k, v in seen.items()})
    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(failures.values())
    operations = sum(1 for item in spec["paths"].values() for method in item if method != "parameters")
    assert len(seen) == operations, sorted(seen)
    # The credentials worked: every operation got past authentication at least once.
    assert all(statuses - {401} for statuses in seen.values()), seen
