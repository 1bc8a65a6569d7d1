"""The agent's confirm on the lean route (issue #13 §4): ``POST {ledger}/{slug}/operations/{id}/confirm``
answered in front of Litestar, as ``asgi.py`` serves it, exactly as the Litestar handler answers.

Each refusal is sent once through each entry point (a fresh DPoP proof each time, everything
else the same) and the two answers compared byte for byte: status, body and every header but
the request ID (``WWW-Authenticate``, ``Retry-After``, ``Cache-Control``, the security
headers, ``Content-Length``). A confirm through the lean route performs once (OPS-6-02) and
answers the outcome; its requests are counted in the request metrics under the Litestar
route's template, traced as the Litestar route is, and a crash is the app's plain 500,
logged without the secret it carries.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from frontdoor_core.errors import Conflict
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient
from opentelemetry.trace import SpanKind
from prometheus_client import REGISTRY

from tests.conftest import unique
from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.ledger.conftest import LEDGER, Shop, operations_agent
from tests.integration.ledger.test_ledger_operations import proposed, signed_in
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

_LITESTAR_SAW: list[str] = []  # the paths the lean entry point handed on to Litestar


class _Watched:
    """The Litestar app behind the lean route, noting which requests reach it."""

    def __init__(self, app: Any) -> None:
        self._app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            _LITESTAR_SAW.append(scope["path"])
        await self._app(scope, receive, send)


_CONFIRM_TEMPLATE = "/{slug}/operations/{operation_id}/confirm"  # Litestar's path_template label


@pytest.fixture(scope="session")
async def lean_ledger(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                      ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The ledger as ``asgi.py`` serves it: the lean confirm route in front of Litestar."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_httpkit import lean_route_observer
    from frontdoor_ledger.app import create_app
    from frontdoor_ledger.http.lean_routes import LeanRoutes

    app = LeanRoutes(_Watched(create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))),
                     max_body_bytes=settings.max_body_bytes, hsts=False, observe=lean_route_observer("ledger"))
    async with AsyncTestClient(app, base_url=LEDGER) as client:  # type: ignore[arg-type]
        yield client


@pytest.fixture
def lean(shop: Shop, lean_ledger: AsyncTestClient[Any]) -> Shop:
    """The same shop (tenant, kind, perform webhook), its agents talking to the lean entry point."""
    return dataclasses.replace(shop, ledger=lean_ledger)


def _wire(r: httpx.Response) -> tuple[int, bytes, list[tuple[str, str]]]:
    headers = sorted((k.lower(), v) for k, v in r.headers.multi_items() if k.lower() != "x-request-id")
    return r.status_code, r.content, headers


def _same(via_lean: httpx.Response, via_litestar: httpx.Response) -> None:
    assert _wire(via_lean) == _wire(via_litestar)
    assert via_lean.headers.get("x-request-id")  # the request ID middleware runs on the lean route too
    assert via_lean.headers["cache-control"] == "no-store"
    assert via_lean.headers["x-content-type-options"] == "nosniff"  # and the security headers


Send = Callable[[Shop], Awaitable[httpx.Response]]


async def _both(lean: Shop, shop: Shop, send: Send) -> tuple[httpx.Response, httpx.Response]:
    """``send`` through the lean entry point (where Litestar sees no confirm), then through Litestar."""
    assert lean.ledger is not shop.ledger
    _LITESTAR_SAW.clear()
    via_lean = await send(lean)
    assert not [p for p in _LITESTAR_SAW if p.endswith("/confirm")], _LITESTAR_SAW
    return via_lean, await send(shop)


async def _post(s: Shop, path: str, *, headers: dict[str, str], body: bytes) -> httpx.Response:
    return await s.ledger.post(f"{LEDGER}{path}", content=body, headers={"Content-Type": "application/json", **headers})


def _auth(s: Shop, agent: TestAgent, token: str, url: str, **proof: Any) -> dict[str, str]:
    return {"Authorization": f"DPoP {token}", "DPoP": agent.dpop("POST", url, token=token, **{"iat": s.now(), **proof})}


async def test_the_caller_refusals_are_the_litestar_handlers_byte_for_byte(
        lean: Shop, shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    """PAP-4.3 (the Session Token and its DPoP proof, OPS-3.2-01 ownership): 401s with their
    challenge, the one 404 for an unknown tenant, operation or another user's operation."""
    _, tokens, op = await proposed(shop, agent)
    token, url = tokens["access_token"], shop.url(op["operation_id"], "confirm")
    path = url[len(LEDGER):]
    body = json.dumps({"revision": op["revision"], "approved_by": "user"}).encode()
    _, other = await signed_in(shop, agent)
    stranger = operations_agent(web)
    _, stranger_tokens = await signed_in(shop, stranger)
    unknown = shop.url("op_unknown_0000", "confirm")
    cases: list[tuple[str, Send, int, str]] = [
        ("no credentials", lambda s: _post(s, path, headers={}, body=body), 401, "invalid_token"),
        ("unknown tenant", lambda s: _post(s, f"/{unique('no-')}/operations/{op['operation_id']}/confirm",
                                           headers=_auth(s, agent, token, url), body=body), 404, "operation_not_found"),
        ("a Bearer token", lambda s: _post(s, path, headers={"Authorization": f"Bearer {token}"}, body=body),
         401, "invalid_token"),
        ("a proof for another URL", lambda s: _post(s, path, headers=_auth(s, agent, token, url + "x"), body=body),
         401, "invalid_dpop_proof"),
        ("a proof for another method", lambda s: _post(s, path, headers={
            "Authorization": f"DPoP {token}", "DPoP": agent.dpop("GET", url, token=token, iat=s.now())}, body=body),
         401, "invalid_dpop_proof"),
        ("a stale proof", lambda s: _post(s, path, headers=_auth(s, agent, token, url, iat=s.now() - 3600), body=body),
         401, "invalid_dpop_proof"),
        ("another user's operation", lambda s: _post(s, path, headers=_auth(s, agent, other["access_token"], url),
                                                     body=body), 404, "operation_not_found"),
        ("another agent's operation", lambda s: _post(s, path, headers=_auth(
            s, stranger, stranger_tokens["access_token"], url), body=body), 404, "operation_not_found"),
        ("an unknown operation", lambda s: _post(s, unknown[len(LEDGER):], headers=_auth(s, agent, token, unknown),
                                                 body=body), 404, "operation_not_found"),
        ("a PAP 1.0 Poppy-Session that is not a JWT", lambda s: _post(s, path, headers={
            "Poppy-Session": "not-a-jwt", "DPoP": agent.dpop("POST", url, iat=s.now())}, body=body),
         400, "invalid_session"),
    ]
    for name, send, status, error in cases:
        via_lean, via_litestar = await _both(lean, shop, send)
        assert (via_lean.status_code, via_lean.json()["error"]) == (status, error), (name, via_lean.text)
        _same(via_lean, via_litestar)
        if status == 401:
            assert via_lean.headers["www-authenticate"].startswith("DPoP"), name
    assert shop.receiver.performed == {}


async def test_a_replayed_proof_is_refused_the_same_way(lean: Shop, shop: Shop, agent: TestAgent) -> None:
    """RFC 9449 §11.1: a proof's ``jti`` is claimed once; the second use is ``401 invalid_dpop_proof``."""
    _, tokens, op = await proposed(shop, agent)
    token, url = tokens["access_token"], shop.url(op["operation_id"], "confirm")
    answers = []
    for s in (lean, shop):
        headers = _auth(s, agent, token, url)
        await _post(s, url[len(LEDGER):], headers=headers, body=b"[1]")  # 400 invalid_request, proof claimed
        answers.append(await _post(s, url[len(LEDGER):], headers=headers, body=b"[1]"))
    assert answers[0].status_code == 401 and answers[0].json()["error"] == "invalid_dpop_proof"
    assert "already used" in answers[0].json()["error_description"]
    _same(*answers)


async def test_the_operation_refusals_are_the_litestar_handlers_byte_for_byte(
        lean: Shop, shop: Shop, agent: TestAgent, runtime: Any) -> None:
    """OPS-3.1-01 (409 terms_changed with the current operation), OPS-5.1-05, a malformed body,
    a kind's scope (insufficient_scope with its challenge), a disabled perform webhook (503)."""
    _, tokens, op = await proposed(shop, agent)
    token = tokens["access_token"]

    async def confirm(body: Any, approved_by: str = "user") -> tuple[httpx.Response, httpx.Response]:
        return await _both(lean, shop, lambda s: s.agent(agent, token, op["operation_id"], "confirm", body))

    for body, status, error in [([1], 400, "invalid_request"), ({"revision": "1", "approved_by": "user"}, 400,
                                                                    "invalid_request"),
                                ({"revision": 1, "approved_by": "standing_permission"}, 403, "user_approval_required")]:
        via_lean, via_litestar = await confirm(body)
        assert (via_lean.status_code, via_lean.json()["error"]) == (status, error), via_lean.text
        _same(via_lean, via_litestar)
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/revisions", headers=shop.api,
                               json={"summary": "Order 2 x espresso beans (1 kg) for 41.00 EUR, delivered Friday"})
    assert r.status_code == 200, r.text
    via_lean, via_litestar = await confirm({"revision": 1, "approved_by": "user"})
    assert via_lean.status_code == 409 and via_lean.json()["operation"]["revision"] == 2, via_lean.text
    _same(via_lean, via_litestar)
    # a Session signed in without the kind's scope
    user = unique("usr_")
    narrow = await shop.company.sign_in(agent, user, unique("acct_"), scope="poppy:read")
    scoped = (await shop.propose(narrow, agent, user)).json()["operation"]
    via_lean, via_litestar = await _both(lean, shop, lambda s: s.confirm(agent, narrow["access_token"], scoped))
    assert via_lean.status_code == 403 and via_lean.json()["error"] == "insufficient_scope", via_lean.text
    assert 'scope="poppy:write"' in via_lean.headers["www-authenticate"]
    _same(via_lean, via_litestar)
    # the perform webhook disabled: nobody would perform it
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_endpoints SET enabled = false WHERE tenant_id = $1 AND id = $2",
                           shop.tenant.id, shop.endpoint_id)
    latest = (await shop.agent(agent, token, op["operation_id"])).json()
    via_lean, via_litestar = await _both(lean, shop, lambda s: s.confirm(agent, token, latest))
    assert via_lean.status_code == 503 and via_lean.headers["retry-after"] == "60", via_lean.text
    _same(via_lean, via_litestar)
    assert shop.receiver.performed == {}


async def test_rate_limits_and_an_unavailable_redis_are_refused_the_same_way(
        lean: Shop, shop: Shop, agent: TestAgent, monkeypatch: pytest.MonkeyPatch) -> None:
    """PAP-4.3-18: ``429 rate_limited`` with ``Retry-After``; Redis away, ``503`` (failing closed)."""
    from frontdoor_ledger.http import agent_operations

    _, tokens, op = await proposed(shop, agent)
    monkeypatch.setattr(agent_operations, "REQUESTS_PER_SESSION_PER_MINUTE", 0)
    via_lean, via_litestar = await _both(lean, shop, lambda s: s.confirm(agent, tokens["access_token"], op))
    assert via_lean.status_code == 429 and via_lean.json()["error"] == "rate_limited", via_lean.text
    assert int(via_lean.headers["retry-after"]) > 0 and int(via_litestar.headers["retry-after"]) > 0
    # the window's remaining seconds may tick between the two requests: all else byte for byte
    assert _wire(via_lean)[:2] == _wire(via_litestar)[:2]
    assert [h for h in _wire(via_lean)[2] if h[0] != "retry-after"] == [
        h for h in _wire(via_litestar)[2] if h[0] != "retry-after"]

    async def away(*_: Any, **__: Any) -> Any:
        raise ConnectionError("redis is away")

    monkeypatch.setattr(agent_operations, "hit", away)
    via_lean, via_litestar = await _both(lean, shop, lambda s: s.confirm(agent, tokens["access_token"], op))
    assert via_lean.status_code == 503 and via_lean.headers["retry-after"] == "5", via_lean.text
    _same(via_lean, via_litestar)
    assert shop.receiver.performed == {}


async def test_a_body_over_the_limit_is_413_as_through_litestar(lean: Shop, shop: Shop, agent: TestAgent,
                                                                settings: Settings) -> None:
    _, tokens, op = await proposed(shop, agent)
    url = shop.url(op["operation_id"], "confirm")
    big = b'{"revision":1,"approved_by":"user","x":"' + b"x" * settings.max_body_bytes + b'"}'
    via_lean, via_litestar = await _both(lean, shop, lambda s: _post(
        s, url[len(LEDGER):], headers=_auth(s, agent, tokens["access_token"], url), body=big))
    assert via_lean.status_code == 413 and via_lean.json()["error"] == "invalid_request", via_lean.text
    _same(via_lean, via_litestar)
    assert shop.receiver.performed == {}


async def test_a_confirm_through_the_lean_route_performs_once_and_answers_the_outcome(
        lean: Shop, shop: Shop, agent: TestAgent) -> None:
    """OPS-6-02, OPS-6-05: the winner's answer carries the outcome; a later confirm through
    either entry point answers the operation unchanged, the same bytes, and performs nothing."""
    from frontdoor_core.metrics import CONFIRMS

    won = CONFIRMS.labels("won")._value.get()
    _, tokens, op = await proposed(shop, agent)
    _LITESTAR_SAW.clear()
    r = await lean.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200, r.text
    assert _LITESTAR_SAW == []
    done = r.json()
    assert done["state"] == "succeeded" and done["confirmation"]["approved_by"] == "user"
    assert done["result"]["summary"].startswith("Order")
    assert shop.receiver.performed == {op["operation_id"]: 1}
    assert CONFIRMS.labels("won")._value.get() == won + 1
    via_lean, via_litestar = await _both(lean, shop, lambda s: s.confirm(agent, tokens["access_token"], op))
    assert via_lean.json() == done
    _same(via_lean, via_litestar)
    assert shop.receiver.performed == {op["operation_id"]: 1}
    # the other endpoints at the same path prefix still go to Litestar
    read = await lean.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.status_code == 200 and read.json() == done


def _count(status: int) -> float:
    value = REGISTRY.get_sample_value("frontdoor_requests_total", {
        "method": "POST", "path": _CONFIRM_TEMPLATE, "status_code": str(status), "app_name": "ledger"})
    return value or 0.0


async def test_its_requests_are_counted_under_the_litestar_routes_template(lean: Shop, shop: Shop) -> None:
    path = f"/{shop.tenant.slug}/operations/op_x/confirm"
    before = _count(401)
    await _post(shop, path, headers={}, body=b"{}")  # through Litestar: its middleware labels the series
    assert _count(401) == before + 1
    await _post(lean, path, headers={}, body=b"{}")
    assert _count(401) == before + 2


async def test_a_crash_is_the_apps_plain_500_logged_without_the_secret(
        lean: Shop, shop: Shop, monkeypatch: pytest.MonkeyPatch) -> None:
    from frontdoor_ledger.http import agent_operations

    key = shop.tenant.api_key

    async def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError(f"upstream refused (Authorization: Bearer {key})")

    monkeypatch.setattr(agent_operations, "_owned_with", boom)
    path = f"/{shop.tenant.slug}/operations/op_x/confirm"
    before = _count(500)
    with capture_logs() as buf:
        via_lean, via_litestar = await _both(lean, shop, lambda s: _post(s, path, headers={}, body=b"{}"))
    assert via_lean.status_code == 500 and via_lean.json()["error"] == "server_error"
    _same(via_lean, via_litestar)
    assert key not in via_lean.text
    logged = buf.getvalue()
    crashes = [json.loads(line) for line in logged.splitlines()
               if line.startswith("{") and json.loads(line).get("event") == "unhandled_exception"]
    assert len(crashes) == 2 and all("RuntimeError" in json.dumps(c) for c in crashes)
    assert key.split("_", 2)[2] not in logged  # the key's secret part is masked
    assert _count(500) == before + 2


async def test_a_use_cases_refusal_is_rendered_as_the_apps_handler_does(
        lean: Shop, shop: Shop, monkeypatch: pytest.MonkeyPatch) -> None:
    from frontdoor_ledger.http import agent_operations

    async def conflict(*_: Any, **__: Any) -> Any:
        raise Conflict("not_in_progress", "Only an operation in progress can have an outcome.")

    monkeypatch.setattr(agent_operations, "_owned_with", conflict)
    path = f"/{shop.tenant.slug}/operations/op_x/confirm"
    via_lean, via_litestar = await _both(lean, shop, lambda s: _post(s, path, headers={}, body=b"{}"))
    assert via_lean.status_code == 409 and via_lean.json()["error"] == "not_in_progress", via_lean.text
    _same(via_lean, via_litestar)


async def test_a_confirm_through_the_lean_route_is_one_trace_to_the_perform_webhook(
        lean: Shop, agent: TestAgent, web: MockWeb) -> None:
    """As through Litestar (test_ledger_tracing): the server span continues the agent's
    ``traceparent``, named by the route template; the perform webhook carries the same trace;
    the request's log lines carry the trace and the request ID."""
    import secrets

    _, tokens, op = await proposed(lean, agent)
    seen: list[dict[str, str]] = []
    hook = f"https://{lean.tenant.slug}.shop.example/webhooks/frontdoor"

    async def recording(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.headers))
        return await lean.receiver(request)

    web.handle(hook, recording)
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    url = lean.url(op["operation_id"], "confirm")
    token = tokens["access_token"]
    with capture_spans() as spans, capture_logs() as logs:
        r = await _post(lean, url[len(LEDGER):], body=json.dumps({"revision": 1, "approved_by": "user"}).encode(),
                        headers={**_auth(lean, agent, token, url), "traceparent": f"00-{trace_id}-{parent}-01"})
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    server = [s for s in spans.spans if s.kind == SpanKind.SERVER and format(s.context.trace_id, "032x") == trace_id]
    assert [s.name for s in server] == ["POST /{slug}/operations/{operation_id}/confirm"]
    assert server[0].parent is not None and format(server[0].parent.span_id, "016x") == parent
    assert server[0].attributes is not None and server[0].attributes["http.route"] == (
        "/{slug}/operations/{operation_id}/confirm")
    assert server[0].attributes["http.status_code"] == 200
    assert op["operation_id"] not in spans.text() and lean.tenant.slug not in server[0].name
    perform = [h for h in seen if "traceparent" in h]
    assert perform and perform[-1]["traceparent"].split("-")[1] == trace_id
    lines = [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]
    traced = [line for line in lines if line.get("trace_id") == trace_id]
    assert any(line.get("request_id") == r.headers["x-request-id"] for line in traced), lines[-5:]
