"""Property-based fuzzing of the issuer's company-facing routes (schemathesis), from its served OpenAPI.

Every operation of ``{base}/openapi.json`` (the account routes, introspection, the PAP 1.0
state endpoints, discovery) gets generated requests, schema-valid and not, with a fixed
seed, authenticated with the tenant's resource-server credential, the tenant's slug and a
signed-in account offered beside generated ones. Checks: no 5xx, only declared statuses and
media types (``application/problem+json`` on ``/accounts``, OAuth-shaped JSON elsewhere),
bodies matching the declared schemas.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.integration.signin.conftest import Company
from tests.support.agent import TestAgent

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

ISSUER = "https://issuer.frontdoor.test"
MAX_EXAMPLES = 15
# Bounded by MAX_EXAMPLES, not by a clock; pytest-timeout's default is tight on a loaded machine.
pytestmark = pytest.mark.timeout(600)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


async def test_the_issuers_company_routes_survive_fuzzing(company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "alice", "acct_fuzz")
    real = {"slug": company.tenant.slug, "account": "acct_fuzz"}
    auth = {"Authorization": f"Bearer {company.credential}"}
    spec = (await company.issuer.get("/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(spec)
    loop = asyncio.get_running_loop()
    failures: dict[tuple[str, int], str] = {}
    seen: dict[str, set[int]] = {}

    def call(case: Any) -> Any:
        kwargs = case.as_transport_kwargs(base_url=ISSUER, headers=auth)
        request = {k: kwargs[k] for k in ("method", "url", "headers", "params", "cookies") if kwargs.get(k)}
        if "json" in kwargs:
            request["json"] = kwargs["json"]
        elif kwargs.get("data") is not None:
            request["data" if isinstance(kwargs["data"], dict) else "content"] = kwargs["data"]
        return asyncio.run_coroutine_threadsafe(company.issuer.request(**request), loop).result(timeout=30)

    def fuzz(operation: Any) -> None:
        label = operation.label
        names = {p["name"] for p in operation.definition.raw.get("parameters", []) if p.get("in") == "path"}
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
            fuzz(result.ok())

    started = time.monotonic()
    await asyncio.to_thread(fuzz_all)
    elapsed = time.monotonic() - started
    print(f"issuer fuzz: {elapsed:.1f}s", {k: sorted(v) for k, v in seen.items()})
    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(failures.values())
    operations = sum(1 for item in spec["paths"].values() for method in item if method != "parameters")
    assert len(seen) == operations, sorted(seen)
    assert all(statuses - {401} for statuses in seen.values()), seen
    # After the fuzzing (which may have disconnected acct_fuzz), the real token still introspects cleanly.
    r = await company.issuer.post(f"/{company.tenant.slug}/oauth/introspect", data={"token": signed["access_token"]},
                                  headers=auth)
    assert r.status_code == 200 and isinstance(r.json()["active"], bool)
