"""Property-based fuzzing of the console's management API (schemathesis 4).

Every operation in the served OpenAPI document (``/api/v1/openapi.json``) gets up to
``MAX_EXAMPLES`` generated requests, positive (schema-valid) and negative (schema-violating)
mixed, with a fixed seed (``derandomize``). Requests go through the session's in-process
console client, so the app keeps running in the loop that owns its pools: Hypothesis runs
in a worker thread and each case is a synchronous call back into this loop.

Checks: no 5xx (``not_a_server_error``); every status code answered is one the document
declares (``status_code_conformance``), with a declared media type
(``content_type_conformance``, so refusals must be ``application/problem+json``) and a body
matching the declared schema (``response_schema_conformance``).

Calls are made with a second API key, so no sequence can lock the fuzzer out: revoking
the key in use is excluded, and the tenant's first key (the one sign-up returned) is
offered as a real, revocable ``key_id``. Real ids (a claimed domain, a resource-server
credential) are offered beside generated ones so the paths reach past "not found".
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle

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

MAX_EXAMPLES = 25
BASE_URL = "https://console.frontdoor.test"
TIME_BUDGET_S = 60.0
CALL_TIMEOUT_S = 30.0
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


async def _fixtures(console: AsyncTestClient[Any], tenant: TenantHandle) -> dict[str, Any]:
    """A second key to call with, and real ids for the path parameters."""
    keys = (await console.get("/api/v1/api-keys", headers=tenant.auth)).json()["data"]
    assert len(keys) == 1
    caller = await console.post("/api/v1/api-keys", json={"name": "fuzzer"}, headers=tenant.auth)
    assert caller.status_code == 201, caller.text
    domain = f"{unique('fz')}.example.com"
    claimed = await console.post("/api/v1/domains", json={"domain": domain}, headers=tenant.auth)
    assert claimed.status_code == 201, claimed.text
    cred = await console.post("/api/v1/resource-credentials", json={"name": "fuzz"}, headers=tenant.auth)
    assert cred.status_code == 201, cred.text
    return {
        "auth": {"Authorization": f"Bearer {caller.json()['api_key']}"},
        "caller_key_id": caller.json()["id"],
        "path": {"key_id": keys[0]["id"], "domain": domain, "cred_id": cred.json()["id"],
                 "account": "acct_fuzz"},
    }


def _strategy(operation: Any, real_path: dict[str, Any]) -> Any:
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]
    options = [operation.as_strategy(generation_mode=mode) for mode in modes]
    names = {p["name"] for p in operation.definition.raw.get("parameters", []) if p.get("in") == "path"}
    fixed = {name: real_path[name] for name in names if name in real_path}
    if fixed:
        options.append(operation.as_strategy(generation_mode=GenerationMode.POSITIVE, path_parameters=fixed))
    return st.one_of(options)


async def test_management_api_survives_fuzzing(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    spec = (await console.get("/api/v1/openapi.json")).json()
    fx = await _fixtures(console, tenant)
    schema = schemathesis.openapi.from_dict(spec)
    loop = asyncio.get_running_loop()
    failures: dict[tuple[str, int], str] = {}  # the first failing case per operation and status
    seen_statuses: dict[str, set[int]] = {}

    def call(case: Any) -> Any:
        kwargs = case.as_transport_kwargs(base_url=BASE_URL, headers=fx["auth"])
        request = {k: kwargs[k] for k in ("method", "url", "headers", "params", "cookies") if kwargs.get(k)}
        if "json" in kwargs:
            request["json"] = kwargs["json"]
        elif kwargs.get("data") is not None:
            request["content"] = kwargs["data"]
        future = asyncio.run_coroutine_threadsafe(console.request(**request), loop)
        return future.result(timeout=CALL_TIMEOUT_S)

    def fuzz_operation(operation: Any) -> None:
        label = operation.label

        @settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=_strategy(operation, fx["path"]))
        def run(case: Any) -> None:
            if case.path_parameters and case.path_parameters.get("key_id") == fx["caller_key_id"]:
                return  # revoking the key in use: a lockout, not a bug
            response = call(case)
            seen_statuses.setdefault(label, set()).add(response.status_code)
            try:
                case.validate_response(response, checks=CHECKS)
            except FailureGroup as exc:  # collected, so one run reports every failing operation
                failures.setdefault((label, response.status_code),
                                    f"{label} -> {response.status_code}\n{exc}\n{response.text[:500]}")

        run()

    def fuzz_all() -> None:
        for result in schema.get_all_operations():
            fuzz_operation(result.ok())

    started = time.monotonic()
    await asyncio.to_thread(fuzz_all)
    elapsed = time.monotonic() - started

    assert not failures, f"{len(failures)} failing case(s):\n\n" + "\n\n".join(failures.values())
    operations = sum(1 for item in spec["paths"].values() for method in item if method != "parameters")
    assert len(seen_statuses) == operations, sorted(seen_statuses)
    # The key the fuzzer called with still works: nothing it sent locked it out.
    assert (await console.get("/api/v1/tenant", headers=fx["auth"])).status_code == 200
    assert elapsed < TIME_BUDGET_S, f"fuzzing took {elapsed:.1f}s"
