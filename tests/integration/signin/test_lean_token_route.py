"""The token endpoint's lean route (issue #13 §2): ``POST {issuer}/oauth/token`` answered in
front of Litestar, as ``asgi.py`` serves it, exactly as the Litestar handler answers.

Refusals that do not depend on single-use values are sent to both and compared byte for
byte (status, body, the headers that matter); a Session started, renewed and refused through
the lean route is checked on the wire and in PostgreSQL; its requests are counted in the same
request metrics as Litestar's routes.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY

from tests.integration.conftest import TenantHandle
from tests.support.agent import JWT_BEARER, TestAgent
from tests.support.clock import ShiftableClock

from .conftest import Company, make_company

_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
async def company(console: AsyncTestClient[Any], lean: AsyncTestClient[Any], tenant: TenantHandle,
                  clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, lean, tenant, clock, store)


def _same(a: Any, b: Any) -> None:
    assert a.status_code == b.status_code, (a.text, b.text)
    assert a.content == b.content
    for name in ("content-type", "cache-control", "pragma", "retry-after", "www-authenticate"):
        assert a.headers.get(name) == b.headers.get(name), name


@pytest.mark.parametrize(("path", "body", "headers"), [
    ("/no-such-tenant/oauth/token", b"grant_type=x", _FORM),  # unknown issuer: the one 404
    (None, b'{"grant_type":"x"}', {"Content-Type": "application/json"}),  # another media type
    (None, b"scope=a", _FORM),  # no grant_type
    (None, b"grant_type=password&username=a&password=b", _FORM),  # unsupported grant type
    (None, b"grant_type=x&grant_type=y", _FORM),  # a repeated parameter (RFC 6749 §3.2)
    (None, b"grant_type=%ff", _FORM),  # not UTF-8
    (None, b"grant_type=" + JWT_BEARER.encode() + b"&assertion=not-a-jwt&client_id=https%3A%2F%2Fx.example%2F", _FORM),
])
async def test_refusals_are_the_litestar_handlers_byte_for_byte(
        lean: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
        path: str | None, body: bytes, headers: dict[str, str]) -> None:
    url = path or f"/{tenant.slug}/oauth/token"
    via_lean = await lean.post(url, content=body, headers=headers)
    via_litestar = await issuer.post(url, content=body, headers=headers)
    assert via_lean.status_code in (400, 401, 404)
    _same(via_lean, via_litestar)
    assert via_lean.headers["cache-control"] == "no-store"
    assert via_lean.headers.get("x-request-id")  # the request ID middleware still runs
    assert via_lean.headers.get("x-content-type-options") == "nosniff"  # and the security headers


async def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(lean: AsyncTestClient[Any],
                                                                         tenant: TenantHandle) -> None:
    r = await lean.post(f"/{tenant.slug}/oauth/token", content=b"grant_type=" + b"x" * (2 * 1024 * 1024),
                        headers=_FORM)
    assert r.status_code == 413 and r.json()["error"] == "invalid_request"


async def test_a_session_starts_renews_and_a_replayed_assertion_is_refused_through_the_lean_route(
        company: Company, agent: TestAgent, runtime: Runtime) -> None:
    started = await company.session(agent, "alice")
    assert started["token_type"] == "DPoP" and started["session_id"]
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT client_id, user_id, ended_at FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                                  company.tenant.id, started["session_id"])
    assert row is not None and row["client_id"] == agent.client_id and row["ended_at"] is None
    renewed = await company.session(agent, "alice", session_id=started["session_id"])
    assert renewed["session_id"] == started["session_id"]
    # the same client assertion twice: its jti is claimed once (RFC 7523 §3, PAP-4.2)
    now = company.now()
    form = {**company.client_form(agent), "grant_type": JWT_BEARER,
            "assertion": agent.session_assertion(company.tenant.issuer, "alice", iat=now, exp=now + 120)}
    first = await company.issuer.post(f"/{company.tenant.slug}/oauth/token", data=form, headers=company.proof(agent))
    again = await company.issuer.post(f"/{company.tenant.slug}/oauth/token", data=form, headers=company.proof(agent))
    assert first.status_code == 200, first.text
    assert again.status_code in (400, 401) and again.json()["error"] in ("invalid_grant", "invalid_client")
    # a missing DPoP proof is the protocol's refusal, as through Litestar
    no_proof = await company.post_token(agent, {"grant_type": JWT_BEARER, "assertion": agent.session_assertion(
        company.tenant.issuer, "alice", iat=now, exp=now + 120)}, dpop=False)
    assert no_proof.status_code == 400 and no_proof.json()["error"] == "invalid_dpop_proof"


def _count(status: str) -> float:
    value = REGISTRY.get_sample_value("frontdoor_requests_total", {
        "method": "POST", "path": "/{slug}/oauth/token", "status_code": status, "app_name": "issuer"})
    return value or 0.0


async def test_its_requests_are_counted_in_the_request_metrics_by_route_template(
        lean: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    before = _count("400")
    r = await issuer.post(f"/{tenant.slug}/oauth/token", content=b"scope=a", headers=_FORM)
    assert r.status_code == 400
    assert _count("400") == before + 1  # the Litestar route's series ...
    r = await lean.post(f"/{tenant.slug}/oauth/token", content=b"scope=a", headers=_FORM)
    assert r.status_code == 400
    assert _count("400") == before + 2  # ... is the one the lean route counts in


async def test_a_crash_is_a_plain_500_logged_without_the_secret_it_carries(
        lean: AsyncTestClient[Any], tenant: TenantHandle, monkeypatch: Any) -> None:
    from frontdoor_issuer.http import token as token_module

    from tests.integration.console.test_log_redaction import capture_logs

    async def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"upstream refused (Authorization: Bearer {tenant.api_key})")

    monkeypatch.setattr(token_module, "answer", boom)
    before = _count("500")
    with capture_logs() as buf:
        r = await lean.post(f"/{tenant.slug}/oauth/token", content=b"grant_type=x", headers=_FORM)
    assert r.status_code == 500 and r.json()["error"] == "server_error"
    assert r.headers["cache-control"] == "no-store" and tenant.api_key not in r.text
    logged = buf.getvalue()
    assert "unhandled_exception" in logged and "RuntimeError" in logged
    assert tenant.api_key.split("_", 2)[2] not in logged  # the key's secret part is masked
    assert _count("500") == before + 1
