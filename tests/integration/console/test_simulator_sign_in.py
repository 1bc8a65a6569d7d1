"""The agent simulator's Device Sign-In (issue #19 §1, PAP §4.6, RFC 8628) at the wire level.

A real issuer and console; the simulator's requests go over HTTP through the SSRF-safe
fetcher (MockWeb carries them to the issuer's ASGI app). The run stops at the sign-in with
the link and user code on the page; a test "user" signs in the way a browser does, through
the issuer's device page, the company's login handoff (ADR 0002) and the consent page; the
page's Continue polls the ``device_code`` grant (never before the issuer's interval) until
the Account Token is granted, then revokes it (RFC 7009) and finds it refused.

Then the operation (Operations extension v1): proposed in the real ledger for the signed-in
Session, read and confirmed by the simulator at the ledger's operations endpoint over HTTP,
performed by the company's webhook (a `Receiver` verifying the Standard Webhooks signature).

Covers: the whole run green and recorded; the waiting state KEK-encrypted in Redis, the
device code, tokens and DPoP key never on the page; a denial, an expired code and a tenant
without Device Sign-In, each with its finding; viewers and another tenant's admin unable
to continue a run; the operation performed and its delivery shown, no kind, a disabled
perform endpoint and a failing webhook, each with its finding.
"""

from __future__ import annotations

import contextlib
import html
import re
from typing import Any

import httpx
import pytest
from frontdoor_core.redis_keys import shard
from frontdoor_core.runtime import Runtime
from frontdoor_sdk import login_signing_key
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.console.test_simulator import codes, run, statuses, steps, wire
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.ledger.conftest import LEDGER, Receiver, ledger  # noqa: F401 (the ledger app)
from tests.integration.signin.conftest import configure
from tests.integration.signin.test_device_pages import LOGIN, company_login, csrf
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb


def waiting_run(page: str) -> str:
    m = re.search(r'hx-post="/simulator-runs/(sim_\w+)/continue"', page)
    assert m, page
    return m.group(1)


def user_code(page: str) -> str:
    m = re.search(r"<code data-user-code>([^<]+)</code>", page)
    assert m, page
    return m.group(1)


async def offer_device_sign_in(console: AsyncTestClient[Any], t: TenantHandle) -> Any:
    """Device Sign-In on, with the company's login page connected; the login key the company signs with."""
    key = login_signing_key()
    public = dict(key.as_dict(private=False))
    public["kid"] = key.kid
    await configure(console, t, login={"url": LOGIN, "public_jwk": public},
                    device={"enabled": True, "scopes": ["poppy:read"]})
    return key


async def ready(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle, dns: LocalDNS,
                web: MockWeb, *, device: bool = True) -> tuple[Any, str]:
    """Device Sign-In offered (unless ``device`` is False), a verified domain, its documents published; (key, domain)."""
    key = await offer_device_sign_in(console, t) if device else None
    domain = await verified_domain(console, t, dns)
    await publish_all(console, issuer, t, web, domain)
    await wire(web, console, issuer, t)
    return key, domain


async def user_signs_in(issuer: AsyncTestClient[Any], t: TenantHandle, code: str, key: Any, account: str, *,
                        decision: str = "allow") -> None:
    """A browser: the device page, the company's login page (signed handoff), the consent page."""
    issuer.cookies.clear()
    page = await issuer.get(f"/{t.slug}/device", params={"user_code": code})
    assert page.status_code == 200, page.text
    r = await issuer.post(f"/{t.slug}/device", data={"user_code": code, "_csrf_token": csrf(page.text)},
                          follow_redirects=False)
    assert r.status_code == 303, r.text
    response = await company_login(issuer, t, r.headers["location"], key, account)
    r = await issuer.post(f"/{t.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert r.status_code == 303, r.text
    consent = await issuer.get(f"/{t.slug}/consent")
    assert consent.status_code == 200 and "Frontdoor agent simulator" in consent.text
    done = await issuer.post(f"/{t.slug}/consent", data={"_csrf_token": csrf(consent.text), "decision": decision,
                                                         "scope": ["poppy:read"]})
    assert done.status_code == 200, done.text


async def go_on(console: AsyncTestClient[Any], run_id: str) -> httpx.Response:
    page = await console.get("/simulator")
    token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text)
    assert token
    return await console.post(f"/simulator-runs/{run_id}/continue", data={"_csrf_token": token.group(1)})


def record_answers(web: MockWeb, issuer: AsyncTestClient[Any], t: TenantHandle) -> list[tuple[str, Any]]:
    """Carry the device and token endpoints like `wire`, keeping their JSON answers (to look for secrets)."""
    answers: list[tuple[str, Any]] = []
    for path in ("oauth/device", "oauth/token"):
        async def forward(request: httpx.Request, path: str = path) -> httpx.Response:
            headers = {k: v for k, v in request.headers.items()
                       if k.lower() not in ("host", "content-length", "cookie")}
            r = await issuer.request(request.method, request.url.path, content=request.content, headers=headers,
                                     cookies={})
            with contextlib.suppress(ValueError):
                answers.append((path, r.json()))
            return httpx.Response(r.status_code, headers=r.headers, content=r.content)

        web.handle(f"{t.issuer}/{path}", forward)
    return answers


def answered(answers: list[tuple[str, Any]], path: str) -> list[dict[str, Any]]:
    return [a for p, a in answers if p == path]


async def test_device_sign_in_through_the_login_page_then_revocation_refused(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock, runtime: Runtime, db: Any,
) -> None:
    key, domain = await ready(console, issuer, tenant, dns, web)
    answers = record_answers(web, issuer, tenant)
    started = await run(console, tenant, include_operation=True)
    assert started.status_code == 200, started.text
    assert statuses(started.text) == {"discovery": "passed", "session": "passed", "api": "not_run",
                                      "signin": "informational", "operation": "not_run", "revoke": "not_run",
                                      "refused": "not_run"}, codes(started.text)
    rid = waiting_run(started.text)
    device = answered(answers, "oauth/device")[0]
    assert user_code(started.text) == device["user_code"]
    assert f'href="{device["verification_uri_complete"]}" target="_blank"' in started.text
    assert device["verification_uri"] == f"{tenant.issuer}/device"
    company = re.search(r"<p data-sign-in-company>(.*?)</p>", started.text, re.S)
    assert company and f"<code>{domain}</code>" in company.group(1)  # PAP-4.6-03: the company named with the link
    # The device code is the agent's secret: never on the page, in a URL, or in Redis in plaintext.
    assert device["device_code"] not in started.text and "device_code=[redacted]" not in started.text
    blob = await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}")
    assert blob is not None and device["device_code"].encode() not in blob and b"session_token" not in blob
    assert 0 < await runtime.redis.ttl(f"sim:pending:{shard(tenant.id)}:{rid}") <= device["expires_in"]
    # Not in the history until it is over.
    assert await db.fetchval("SELECT count(*) FROM simulator_runs WHERE tenant_id = $1", tenant.id) == 0

    # Continue before the interval: no poll at all (no slow_down earned).
    before = len([q for q in web.requests if q.url.path.endswith("/oauth/token")])
    early = await go_on(console, rid)
    assert early.status_code == 200 and waiting_run(early.text) == rid
    assert len([q for q in web.requests if q.url.path.endswith("/oauth/token")]) == before
    # After it, before the user signed in: the issuer answers authorization_pending, the run waits.
    clock.advance(seconds=6)
    pending = await go_on(console, rid)
    assert waiting_run(pending.text) == rid and "authorization_pending" in pending.text
    assert statuses(pending.text)["signin"] == "informational"

    await user_signs_in(issuer, tenant, device["user_code"], key, "acct_test_ada")
    clock.advance(seconds=6)
    done = await go_on(console, rid)
    assert done.status_code == 200, done.text
    assert statuses(done.text) == {"discovery": "passed", "session": "passed", "api": "not_run",
                                   "signin": "passed", "operation": "informational", "revoke": "passed",
                                   "refused": "passed"}, codes(done.text)
    # No operation kind: the step says so, with its fix, and the run goes on.
    assert codes(done.text) == ["no_operation_kind"] and "operations.md" in done.text
    assert "hx-post=" not in done.text.split('id="sim-live"', 1)[1].split(">", 1)[0]  # the page stops polling
    assert "Refused: 400 invalid_grant" in done.text
    granted = next(a for a in answered(answers, "oauth/token") if a.get("signed_in"))
    # The sign-in is real: the issuer's Session is signed in to the account the company's login vouched for.
    sign_in_row = await db.fetchrow("SELECT client_id, account_id, type, revoked_at FROM sign_ins"
                                    " WHERE tenant_id = $1", tenant.id)
    assert sign_in_row["client_id"] == f"https://console.frontdoor.test/simulator/{tenant.slug}/agent.json"
    assert (sign_in_row["account_id"], sign_in_row["type"]) == ("acct_test_ada", "device")
    assert sign_in_row["revoked_at"] is not None
    # No secret on the page: the tokens, the device code, the proofs and assertions the agent sent.
    secrets = [granted["access_token"], granted["refresh_token"], device["device_code"]]
    sent = [q for q in web.requests if q.method == "POST" and q.url.host == "issuer.frontdoor.test"]
    secrets += [q.headers["dpop"] for q in sent if "dpop" in q.headers]
    for q in sent:
        form = httpx.QueryParams(q.content.decode())
        secrets += [form[k] for k in ("client_assertion", "assertion", "token", "refresh_token", "device_code")
                    if k in form]
    secrets += [s.rsplit(".", 1)[-1] for s in secrets if s.count(".") == 2]
    assert len(secrets) > 10
    for page in (started.text, pending.text, done.text):
        for s in secrets:
            assert s not in page
        assert '"d"' not in page
    shown = html.unescape(done.text)
    assert "refresh_token=[redacted]" in shown and '"refresh_token": "[redacted]"' in shown
    # Over: recorded (passed), the waiting state gone, and a second continue says so.
    row = await db.fetchrow("SELECT id, ok, steps FROM simulator_runs WHERE tenant_id = $1", tenant.id)
    assert row["id"] == rid and row["ok"] is True
    assert [(s["key"], s["status"]) for s in row["steps"]][3:] == [
        ("signin", "passed"), ("operation", "informational"), ("revoke", "passed"), ("refused", "passed")]
    assert await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}") is None
    again = await go_on(console, rid)
    assert again.status_code == 200 and "data-run-finished" in again.text
    stored = await console.get(f"/simulator-runs/{rid}")
    for s in secrets:
        assert s not in stored.text


async def test_a_denied_sign_in_is_its_finding_and_the_run_ends(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock, db: Any,
) -> None:
    key, _ = await ready(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    rid = waiting_run(started.text)
    await user_signs_in(issuer, tenant, user_code(started.text), key, "acct_test_bob", decision="deny")
    clock.advance(seconds=6)
    done = await go_on(console, rid)
    assert codes(done.text) == ["access_denied"]
    assert statuses(done.text)["signin"] == "failed" and statuses(done.text)["revoke"] == "not_run"
    assert "sign-in.md" in done.text and 'href="/settings"' in done.text
    row = await db.fetchrow("SELECT ok FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id, rid)
    assert row is not None and row["ok"] is False


async def test_an_expired_device_code_is_expired_token(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock,
) -> None:
    await ready(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    rid = waiting_run(started.text)
    clock.advance(seconds=3600)
    done = await go_on(console, rid)
    assert codes(done.text) == ["expired_token"] and statuses(done.text)["signin"] == "failed"


async def test_without_device_sign_in_the_run_stops_with_the_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    await ready(console, issuer, tenant, dns, web, device=False)
    r = await run(console, tenant)
    assert codes(r.text) == ["sign_in_not_offered"]
    assert statuses(r.text)["signin"] == "informational" and statuses(r.text)["revoke"] == "not_run"
    assert "data-sign-in-prompt" not in r.text and "sign-in.md" in r.text
    assert steps(r.text)["session"] == "yes"


async def test_viewers_and_other_tenants_cannot_continue_a_run(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, web: MockWeb, clock: ShiftableClock, runtime: Runtime, db: Any,
) -> None:
    key, _ = await ready(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    rid = waiting_run(started.text)
    code = user_code(started.text)
    clock.advance(seconds=6)
    # Another tenant's admin: that run does not exist for them, and nothing is polled.
    polls = len([q for q in web.requests if q.url.path.endswith("/oauth/token")])
    await sign_in(console, other_tenant.email)
    assert (await go_on(console, rid)).status_code == 404
    assert (await console.get("/simulator")).text.count(code) == 0
    # A viewer of the same tenant reads the page but cannot continue.
    viewer = await add_admin(db, tenant, "viewer")
    await sign_in(console, viewer)
    assert (await go_on(console, rid)).status_code == 403
    assert len([q for q in web.requests if q.url.path.endswith("/oauth/token")]) == polls
    assert await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}") is not None
    # The owner still can, and finishes it.
    await user_signs_in(issuer, tenant, code, key, "acct_test_carol")
    await sign_in(console, tenant.email)
    done = await go_on(console, rid)
    assert statuses(done.text)["refused"] == "passed", codes(done.text)


class _Prefixes(dict):  # type: ignore[type-arg]
    """MockWeb's handlers, plus handlers for every path under a prefix (an operation's URLs)."""

    prefixes: dict[tuple[str, str], Any]

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key)
        if found is not None:
            return found
        host, path = key
        return next((h for (ph, pp), h in self.prefixes.items() if ph == host and path.startswith(pp)), default)


def route_prefix(web: MockWeb, client: AsyncTestClient[Any], prefix: str) -> None:
    """Let the fetcher reach every URL under ``prefix`` on the in-process app behind ``client``."""
    if not isinstance(web.handlers, _Prefixes):
        wrapped = _Prefixes(web.handlers)
        wrapped.prefixes = {}
        web.handlers = wrapped
    u = httpx.URL(prefix)

    async def forward(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "cookie")}
        r = await client.request(request.method, request.url.path, content=request.content, headers=headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    web.handlers.prefixes[(u.host, u.path)] = forward  # type: ignore[attr-defined]


async def perform_webhook(console: AsyncTestClient[Any], t: TenantHandle, web: MockWeb, *,
                          answer: str = "succeeded") -> tuple[Receiver, str]:
    """The company's perform webhook (a `Receiver`) and an operation kind that uses it; (receiver, endpoint id)."""
    hook = f"https://{t.slug}.shop.example/webhooks/frontdoor"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook, "description": "perform"}, headers=t.auth)
    assert r.status_code == 201, r.text
    receiver = Receiver(secret=r.json()["secret"], answer=answer)
    web.handle(hook, receiver)
    endpoint = r.json()["endpoint"]["id"]
    r = await console.put("/api/v1/operation-kinds/order.place", headers=t.auth, json={
        "perform_endpoint_id": endpoint, "scopes": ["poppy:read"], "default_expiry_seconds": 900})
    assert r.status_code == 200, r.text
    return receiver, endpoint


async def operation_ready(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger_app: AsyncTestClient[Any],
                          t: TenantHandle, dns: LocalDNS, web: MockWeb, *, answer: str = "succeeded"
                          ) -> tuple[Any, Receiver, str]:
    """`ready`, the perform webhook and the ledger's operations endpoint reachable: (agent key, receiver, endpoint id)."""
    key, _ = await ready(console, issuer, t, dns, web)
    receiver, endpoint = await perform_webhook(console, t, web, answer=answer)
    route_prefix(web, ledger_app, f"{LEDGER}/{t.slug}/operations/")
    return key, receiver, endpoint


async def signed_in_run(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle,
                        key: Any, clock: ShiftableClock, *, include_operation: bool = True
                        ) -> tuple[str, httpx.Response]:
    started = await run(console, t, include_operation=include_operation)
    rid = waiting_run(started.text)
    await user_signs_in(issuer, t, user_code(started.text), key, "acct_test_dora")
    clock.advance(seconds=6)
    return rid, await go_on(console, rid)


async def test_an_operation_is_proposed_approved_and_performed_by_the_webhook(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],  # noqa: F811
    tenant: TenantHandle, other_tenant: TenantHandle, dns: LocalDNS, web: MockWeb, clock: ShiftableClock, db: Any,
) -> None:
    key, receiver, _ = await operation_ready(console, issuer, ledger, tenant, dns, web)
    rid, done = await signed_in_run(console, issuer, tenant, key, clock)
    assert statuses(done.text)["operation"] == "passed", (codes(done.text), done.text)
    assert statuses(done.text)["refused"] == "passed" and codes(done.text) == []
    # The company's webhook received one signed perform, for the simulator's signed-in account, marked as a test.
    performs = [d for d in receiver.deliveries if d["type"] == "operation.perform"]
    assert len(performs) == 1
    data = performs[0]["data"]
    assert data["simulator"] is True and next(iter(data)) == "simulator"  # where a handler looks first
    simulator = f"https://console.frontdoor.test/simulator/{tenant.slug}/agent.json"
    assert data["client_id"] == simulator and data["account"] == "acct_test_dora"
    assert data["input"] == {"simulator": True, "simulator_run": rid} and data["operation"]["terms"] == {
        "simulator": True}
    op = await db.fetchrow("SELECT id, state, client_id, account_id, confirmed_via FROM operations"
                           " WHERE tenant_id = $1", tenant.id)
    assert (op["state"], op["client_id"], op["account_id"]) == ("succeeded", simulator, "acct_test_dora")
    # The agent's side went over HTTP to the operations endpoint: read, then confirm with DPoP.
    calls = [q for q in web.requests if q.url.host == "ledger.frontdoor.test"]
    assert [(q.method, q.url.path) for q in calls] == [
        ("GET", f"/{tenant.slug}/operations/{op['id']}"), ("POST", f"/{tenant.slug}/operations/{op['id']}/confirm")]
    assert all(q.headers["authorization"].startswith("DPoP ") and "dpop" in q.headers for q in calls)
    step = done.text[done.text.index('data-step="operation"'):]
    step = step[:step.index("</article>")]
    assert "answered succeeded: Order" in step
    # The delivery as recorded in the webhooks tables: the attempt's URL and status, never its signature.
    attempt = await db.fetchrow("SELECT a.url, a.response_status FROM webhook_attempts a JOIN webhook_messages m"
                                " ON m.tenant_id = a.tenant_id AND m.id = a.message_id"
                                " WHERE m.tenant_id = $1 AND m.operation_id = $2", tenant.id, op["id"])
    assert attempt["response_status"] == 200 and f"<code>POST {attempt['url']}</code> → 200" in step
    assert "v1," not in step and receiver.secret not in done.text
    for q in calls:
        assert q.headers["authorization"].split(" ", 1)[1] not in done.text and q.headers["dpop"] not in done.text
    stored = await db.fetchval("SELECT steps FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id, rid)
    assert [s["status"] for s in stored if s["key"] == "operation"] == ["passed"]
    # Not usage: the simulator's operation, nor its delivered perform message.
    assert await db.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND state = 'delivered'",
                             tenant.id) == 1
    usage = (await console.get("/api/v1/billing", headers=tenant.auth)).json()["usage"]
    assert (usage["operations"]["used"], usage["webhook_deliveries"]["used"]) == (0, 0)
    # Another tenant sees neither the operation nor the run.
    await sign_in(console, other_tenant.email)
    assert op["id"] not in (await console.get("/operations")).text
    assert (await console.get(f"/simulator-runs/{rid}")).status_code == 404
    assert (await console.get(f"/operations/{op['id']}")).status_code == 404


async def test_unticked_the_run_proposes_nothing_and_sends_no_perform_webhook(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],  # noqa: F811
    tenant: TenantHandle, dns: LocalDNS, web: MockWeb, clock: ShiftableClock, db: Any,
) -> None:
    """The operation step calls the company's real perform webhook, so it is opt-in per run (off by default)."""
    key, receiver, _ = await operation_ready(console, issuer, ledger, tenant, dns, web)
    await sign_in(console, tenant.email)
    form = (await console.get("/simulator")).text
    box = re.search(r'<input type="checkbox" name="include_operation" value="yes"([^>]*)>(.*?)</label>', form, re.S)
    assert box and "checked" not in box.group(1)
    assert f"<code data-perform-url>https://{tenant.slug}.shop.example/webhooks/frontdoor</code>" in box.group(2)
    assert "simulator: true" in box.group(2)
    rid, done = await signed_in_run(console, issuer, tenant, key, clock, include_operation=False)
    assert statuses(done.text) == {"discovery": "passed", "session": "passed", "api": "not_run",
                                   "signin": "passed", "operation": "informational", "revoke": "passed",
                                   "refused": "passed"}, codes(done.text)
    assert codes(done.text) == ["operation_step_not_chosen"]
    assert not [q for q in web.requests if q.url.host == "ledger.frontdoor.test"
                and q.url.path.startswith(f"/{tenant.slug}/")]
    assert receiver.deliveries == []
    assert await db.fetchval("SELECT count(*) FROM operations WHERE tenant_id = $1", tenant.id) == 0
    assert await db.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND purpose = 'perform'",
                             tenant.id) == 0
    assert await db.fetchval("SELECT ok FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id, rid)


async def test_a_viewer_cannot_run_it_with_an_operation(
    console: AsyncTestClient[Any], tenant: TenantHandle, web: MockWeb, db: Any,
) -> None:
    await perform_webhook(console, tenant, web)
    viewer = await add_admin(db, tenant, "viewer")
    csrf_token = await sign_in(console, viewer)
    page = await console.get("/simulator")
    assert page.status_code == 200 and 'name="include_operation"' not in page.text
    r = await console.post("/simulator", data={"_csrf_token": csrf_token, "include_operation": "yes"})
    assert r.status_code == 403
    assert await db.fetchval("SELECT count(*) FROM operations WHERE tenant_id = $1", tenant.id) == 0
    assert await db.fetchval("SELECT count(*) FROM simulator_runs WHERE tenant_id = $1", tenant.id) == 0


async def test_a_disabled_perform_endpoint_is_its_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],  # noqa: F811
    tenant: TenantHandle, dns: LocalDNS, web: MockWeb, clock: ShiftableClock, db: Any,
) -> None:
    key, receiver, endpoint = await operation_ready(console, issuer, ledger, tenant, dns, web)
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint}/disable", headers=tenant.auth)
    assert r.status_code == 200, r.text
    _, done = await signed_in_run(console, issuer, tenant, key, clock)
    assert codes(done.text) == ["perform_endpoint_disabled"]
    assert statuses(done.text)["operation"] == "failed" and statuses(done.text)["revoke"] == "not_run"
    assert 'href="/webhooks"' in done.text and "operations.md" in done.text
    assert receiver.deliveries == [] and await db.fetchval(
        "SELECT count(*) FROM operations WHERE tenant_id = $1", tenant.id) == 0


async def test_a_failing_perform_webhook_leaves_the_outcome_unknown_with_its_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],  # noqa: F811
    tenant: TenantHandle, dns: LocalDNS, web: MockWeb, clock: ShiftableClock, db: Any,
) -> None:
    key, _, _ = await operation_ready(console, issuer, ledger, tenant, dns, web, answer="error")
    _, done = await signed_in_run(console, issuer, tenant, key, clock)
    found = codes(done.text)
    assert statuses(done.text)["operation"] == "failed" and len(found) == 1, (found, done.text)
    assert found[0] == await db.fetchval(
        "SELECT a.error_class FROM webhook_attempts a WHERE a.tenant_id = $1", tenant.id)
    assert await db.fetchval("SELECT state FROM operations WHERE tenant_id = $1", tenant.id) == "in_progress"


async def test_no_secret_of_a_whole_run_is_logged_or_in_a_span(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],  # noqa: F811
    tenant: TenantHandle, dns: LocalDNS, web: MockWeb, clock: ShiftableClock, runtime: Runtime,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The capture of ``test_log_redaction``: the apps' own logging pipeline at debug, every span, stdout/stderr."""
    key, _, _ = await operation_ready(console, issuer, ledger, tenant, dns, web)
    answers = record_answers(web, issuer, tenant)
    seen_before = len(web.requests)
    with capture_spans() as spans, capture_logs() as buf:
        rid, done = await signed_in_run(console, issuer, tenant, key, clock)
        blob = await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}")
    captured = capfd.readouterr()
    assert statuses(done.text)["refused"] == "passed" and statuses(done.text)["operation"] == "passed"
    assert blob is None  # finished: the waiting state is gone
    found: list[str] = []
    for _, answer in answers:
        found += [answer[k] for k in ("access_token", "refresh_token", "device_code") if k in answer]
    for q in web.requests[seen_before:]:
        found += [q.headers[h].split(" ", 1)[-1] for h in ("authorization", "dpop") if h in q.headers]
        if q.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            form = httpx.QueryParams(q.content.decode())
            found += [form[k] for k in ("client_assertion", "assertion", "token", "refresh_token", "device_code")
                      if k in form]
    found += [s.rsplit(".", 1)[-1] for s in found if s.count(".") == 2]
    assert len(found) > 15
    text = "\n".join([buf.getvalue(), captured.out, captured.err, spans.text()])
    assert len(spans.spans) > 10 and "simulator-runs" in text and "/oauth/device" in text  # it sees the run
    leaked = [s[:12] for s in found if s in text]
    assert not leaked, f"secrets in logs/spans: {leaked}"


async def test_a_waiting_run_is_bound_to_its_tenant_and_run(runtime: Runtime) -> None:
    """The KEK's associated data names the tenant and run: a value copied under another key does not load."""
    from datetime import UTC, datetime

    from frontdoor_console.simulator import PendingRun, PendingRuns, SignInWait
    from frontdoor_console.simulator.sign_in import DeviceStart
    from frontdoor_tenancy.credentials import Kek, generate_kek_value

    ta, tb, r1, r2 = unique("ten_a"), unique("ten_b"), unique("sim_a"), unique("sim_b")
    runs = PendingRuns(runtime.redis, Kek.from_env_value(generate_kek_value()))
    now = int(datetime.now(UTC).timestamp())
    device = DeviceStart(device_code="dc-secret-123", user_code="ABCD-EFGH", verification_uri="https://i/device",
                         verification_uri_complete="https://i/device?user_code=ABCD-EFGH", interval=5, expires_in=600)
    wait = SignInWait(user_id="u", session_id="ses_x", session_token="st-secret-456", dpop_jwk={}, dpop_nonce=None,
                      device=device, interval=5, expires_at=now + 600, next_poll_at=now + 5)
    run = PendingRun(run_id=r1, tenant_id=ta, member_id="adm", member_email="a@example.com",
                     started_at=datetime.now(UTC), steps=[], wait=wait)
    await runs.save(run, now=now)
    loaded = await runs.load(ta, r1)
    assert loaded is not None and loaded.wait.device.device_code == "dc-secret-123"
    blob = await runtime.redis.get(f"sim:pending:{shard(ta)}:{r1}")
    assert b"dc-secret-123" not in blob and b"st-secret-456" not in blob
    assert 590 <= await runtime.redis.ttl(f"sim:pending:{shard(ta)}:{r1}") <= 600
    assert await runs.load(tb, r1) is None and await runs.load(ta, r2) is None
    for tenant_id, run_id in ((tb, r1), (ta, r2)):
        await runtime.redis.set(f"sim:pending:{shard(tenant_id)}:{run_id}", blob, ex=60)
        assert await runs.load(tenant_id, run_id) is None  # moved: does not decrypt
    token = await runs.lock(ta, r1)
    assert token and await runs.lock(ta, r1) is None
    assert await runs.unlock(ta, r1, token) and await runs.lock(ta, r1) is not None
    assert (await runs.take(ta, r1)) is not None and await runs.take(ta, r1) is None
    assert await runs.load(ta, r1) is None


async def test_a_lock_that_expired_is_neither_freed_nor_overwritten_by_its_old_owner(runtime: Runtime) -> None:
    """The continue lock is its owner's: after it expired and another request took it, the old owner's unlock
    leaves the new owner's lock, and its save leaves the run as the new owner has it."""
    from datetime import UTC, datetime

    from frontdoor_console.simulator import PendingRun, PendingRuns, SignInWait
    from frontdoor_tenancy.credentials import Kek, generate_kek_value

    ta, r1 = unique("ten_a"), unique("sim_a")
    runs = PendingRuns(runtime.redis, Kek.from_env_value(generate_kek_value()))
    now = int(datetime.now(UTC).timestamp())
    wait = SignInWait(user_id="u", session_id="ses_x", session_token="st", dpop_jwk={}, dpop_nonce=None,
                      interval=5, expires_at=now + 600, next_poll_at=now + 5)
    run = PendingRun(run_id=r1, tenant_id=ta, member_id="adm", member_email="a@example.com",
                     started_at=datetime.now(UTC), steps=[], wait=wait)
    await runs.save(run, now=now)
    lock_key = f"sim:pending:{shard(ta)}:{r1}:lock"
    old = await runs.lock(ta, r1)
    assert old and await runtime.redis.pttl(lock_key) > 0
    await runtime.redis.delete(lock_key)  # it expired under a slow resume
    new = await runs.lock(ta, r1)
    assert new and new != old
    run.wait.polls = 7
    assert await runs.save(run, now=now, lock=old) is False  # the old owner's stale save
    assert (await runs.load(ta, r1)).wait.polls == 0
    assert await runs.unlock(ta, r1, old) is False
    assert (await runtime.redis.get(lock_key)).decode() == new and await runs.lock(ta, r1) is None
    assert await runs.save(run, now=now, lock=new) and (await runs.load(ta, r1)).wait.polls == 7
    assert await runs.unlock(ta, r1, new) and await runtime.redis.get(lock_key) is None


def device_polls(web: MockWeb, t: TenantHandle) -> int:
    """The device_code grant requests to ``t``'s token endpoint."""
    return len([q for q in web.requests if q.url.path.endswith(f"/{t.slug}/oauth/token")
                and b"device_code" in q.content])


def page_csrf(page: str) -> str:
    token = re.search(r'name="_csrf_token" value="([^"]+)"', page)
    assert token
    return token.group(1)


async def signed_in_waiting(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle,
                            dns: LocalDNS, web: MockWeb, clock: ShiftableClock, account: str) -> tuple[str, str]:
    """A run whose user signed in on the device, not continued yet (the poll interval past): (run id, CSRF token)."""
    key, _ = await ready(console, issuer, t, dns, web)
    started = await run(console, t)
    rid = waiting_run(started.text)
    await user_signs_in(issuer, t, user_code(started.text), key, account)
    await sign_in(console, t.email)
    csrf_token = page_csrf((await console.get("/simulator")).text)
    clock.advance(seconds=6)
    return rid, csrf_token


async def continue_inside(console: AsyncTestClient[Any], run_id: str, csrf_token: str) -> httpx.Response:
    """Another continue of ``run_id``, sent from inside the console app's own event loop while a request is in
    flight there (the test client runs the app on a loop of its own and sends one request at a time)."""
    transport = httpx.ASGITransport(app=console.app)
    async with httpx.AsyncClient(transport=transport, base_url=str(console.base_url),
                                 cookies=dict(console.cookies)) as inside:
        return await inside.post(f"/simulator-runs/{run_id}/continue", data={"_csrf_token": csrf_token})


async def test_two_continues_at_once_poll_once(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock, runtime: Runtime, db: Any,
) -> None:
    """While one continue holds the run's lock (its poll in flight), another answers the run in progress and polls
    nothing; the lock stays the first's until it ends, and the run is recorded once."""
    from frontdoor_console.http.deps import ctx_of

    rid, csrf_token = await signed_in_waiting(console, issuer, tenant, dns, web, clock, "acct_test_gus")
    token_url = httpx.URL(f"{tenant.issuer}/oauth/token")
    forward = web.handlers[(token_url.host, token_url.path)]
    lock_key = f"sim:pending:{shard(tenant.id)}:{rid}:lock"
    during: list[tuple[httpx.Response, Any, Any]] = []

    async def slow_poll(request: httpx.Request) -> httpx.Response:
        if b"device_code" in request.content and not during:
            redis = ctx_of(console.app.state).redis  # the app's loop's client
            held = await redis.get(lock_key)
            other = await continue_inside(console, rid, csrf_token)  # the page's poll, while this one is in flight
            during.append((other, held, await redis.get(lock_key)))
        return await forward(request)

    web.handle(str(token_url), slow_poll)
    done = await go_on(console, rid)
    assert statuses(done.text)["refused"] == "passed", codes(done.text)
    assert len(during) == 1
    other, held, after = during[0]
    assert other.status_code == 200, other.text
    assert waiting_run(other.text) == rid and statuses(other.text)["signin"] == "informational"
    assert held is not None and after == held  # the other continue neither took nor freed the lock
    assert device_polls(web, tenant) == 1  # the used device_code was never polled again
    assert await runtime.redis.get(lock_key) is None
    assert await db.fetchval("SELECT count(*) FROM simulator_runs WHERE tenant_id = $1", tenant.id) == 1


async def test_a_slow_continue_whose_lock_expired_leaves_the_next_owners_lock(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock, runtime: Runtime,
) -> None:
    """The lock expires while the continue's poll is in flight (the issuer still answers pending) and another
    request takes it: the slow continue neither deletes that lock nor saves the run over the new owner's."""
    from frontdoor_console.http.deps import ctx_of

    await ready(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    rid = waiting_run(started.text)
    clock.advance(seconds=6)
    token_url = httpx.URL(f"{tenant.issuer}/oauth/token")
    forward = web.handlers[(token_url.host, token_url.path)]
    lock_key = f"sim:pending:{shard(tenant.id)}:{rid}:lock"

    async def slow_poll(request: httpx.Request) -> httpx.Response:
        redis = ctx_of(console.app.state).redis  # the app's loop's client
        await redis.delete(lock_key)  # expired under this slow poll...
        await redis.set(lock_key, "next-owner", px=30_000)  # ...and taken by the next request
        return await forward(request)

    web.handle(str(token_url), slow_poll)
    slow = await go_on(console, rid)
    assert slow.status_code == 200 and "authorization_pending" in slow.text
    assert await runtime.redis.get(lock_key) == b"next-owner"
    assert 0 < await runtime.redis.pttl(lock_key) <= 30_000
    # Its save was refused: the stored run is as it was before this continue's poll.
    page = await go_on(console, rid)  # the lock is the next owner's: in progress, nothing polled
    assert waiting_run(page.text) == rid and "poll(s) so far" not in page.text
    assert device_polls(web, tenant) == 1


async def test_a_continue_that_read_the_run_before_another_finished_it_reads_it_again(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    clock: ShiftableClock, db: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run is read again once the lock is taken: a continue that read it, then got the lock only after another
    continue had finished the run, finds it over and never polls the used device_code."""
    from frontdoor_console.simulator import PendingRuns

    rid, csrf_token = await signed_in_waiting(console, issuer, tenant, dns, web, clock, "acct_test_hal")
    lock = PendingRuns.lock
    first: list[httpx.Response] = []

    async def other_finishes_first(self: PendingRuns, tenant_id: str, run_id: str) -> str | None:
        if not first:  # this continue has read the run; another one runs it to its end first
            first.append(httpx.Response(0))
            first[0] = await continue_inside(console, rid, csrf_token)
        return await lock(self, tenant_id, run_id)

    monkeypatch.setattr(PendingRuns, "lock", other_finishes_first)
    late = await go_on(console, rid)
    assert statuses(first[0].text)["refused"] == "passed", codes(first[0].text)
    assert late.status_code == 200 and "data-run-finished" in late.text, late.text
    assert device_polls(web, tenant) == 1
    assert await db.fetchval("SELECT count(*) FROM simulator_runs WHERE tenant_id = $1", tenant.id) == 1


async def offer_direct_sign_in(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle,
                               dns: LocalDNS, web: MockWeb) -> Any:
    """Direct Sign-In only (no Device Sign-In), the login page connected, documents published; the login key."""
    key = login_signing_key()
    public = dict(key.as_dict(private=False))
    public["kid"] = key.kid
    await configure(console, t, login={"url": LOGIN, "public_jwk": public},
                    direct={"enabled": True, "scopes": ["poppy:read"]})
    domain = await verified_domain(console, t, dns)
    await publish_all(console, issuer, t, web, domain)
    await wire(web, console, issuer, t)
    return key


def authorize_url(page: str) -> httpx.URL:
    link = re.search(r'<a href="([^"]+)" target="_blank" rel="noopener noreferrer" data-authorize-link>', page)
    assert link, page
    return httpx.URL(html.unescape(link.group(1)))


async def browser_authorizes(issuer: AsyncTestClient[Any], t: TenantHandle, url: httpx.URL, key: Any, account: str,
                             *, decision: str = "allow") -> httpx.URL:
    """A browser: the authorization URL, the company's login page, consent; the redirect back to the agent."""
    issuer.cookies.clear()
    r = await issuer.get(url.raw_path.decode(), follow_redirects=False)
    assert r.status_code == 303, r.text
    response = await company_login(issuer, t, r.headers["location"], key, account)
    r = await issuer.post(f"/{t.slug}/login/callback", data={"response": response}, follow_redirects=False)
    consent = await issuer.get(f"/{t.slug}/consent")
    decided = await issuer.post(f"/{t.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                             "decision": decision, "scope": ["poppy:read"]},
                                follow_redirects=False)
    assert decided.status_code == 303, decided.text
    return httpx.URL(decided.headers["location"])


async def test_direct_sign_in_when_only_it_is_offered(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, web: MockWeb, runtime: Runtime, db: Any,
) -> None:
    """PAP §4.5: the authorization URL on the page (S256, state), the browser back at the simulator's callback."""
    key = await offer_direct_sign_in(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    assert statuses(started.text)["signin"] == "informational", codes(started.text)
    url = authorize_url(started.text)
    query = dict(url.params)
    redirect_uri = f"https://console.frontdoor.test/simulator/{tenant.slug}/callback"
    assert str(url).startswith(f"{tenant.issuer}/oauth/authorize?")
    assert (query["client_id"], query["redirect_uri"], query["code_challenge_method"], query["scope"]) == (
        f"https://console.frontdoor.test/simulator/{tenant.slug}/agent.json", redirect_uri, "S256", "poppy:read")
    rid = waiting_run(started.text)
    assert query["state"].startswith(rid + "~") and len(query["state"]) > len(rid) + 30
    blob = await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}")
    assert blob is not None and query["state"].encode() not in blob

    # The test user's browser: authorize, the company's login page, consent; back to the simulator.
    back = await browser_authorizes(issuer, tenant, url, key, "acct_test_eve")
    assert str(back).startswith(redirect_uri + "?")
    code = back.params["code"]
    # A forged state (or another tenant's admin) reaches nothing, and the run still waits.
    forged = back.copy_merge_params({"state": rid + "~forged"})
    assert (await console.get(forged.raw_path.decode())).status_code == 404
    await sign_in(console, other_tenant.email)
    assert (await console.get(back.raw_path.decode())).status_code == 404
    assert await runtime.redis.get(f"sim:pending:{shard(tenant.id)}:{rid}") is not None

    await sign_in(console, tenant.email)
    done = await console.get(back.raw_path.decode())
    assert done.status_code == 200, done.text
    assert statuses(done.text) == {"discovery": "passed", "session": "passed", "api": "not_run",
                                   "signin": "passed", "operation": "informational", "revoke": "passed",
                                   "refused": "passed"}, codes(done.text)
    assert "Direct Sign-In at your login page" in done.text and code not in done.text
    sent = [q for q in web.requests if q.url.path.endswith("/oauth/token")
            and "authorization_code" in q.content.decode()]
    assert len(sent) == 1
    form = httpx.QueryParams(sent[0].content.decode())
    assert (form["redirect_uri"], form["code"]) == (redirect_uri, code) and form["code_verifier"] not in done.text
    assert await db.fetchval("SELECT type FROM sign_ins WHERE tenant_id = $1", tenant.id) == "direct"
    assert await db.fetchval("SELECT ok FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id, rid)
    # The code is redeemed once: the callback again finds no run.
    assert (await console.get(back.raw_path.decode())).status_code == 404


async def test_a_direct_sign_in_denied_comes_back_as_its_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    db: Any,
) -> None:
    key = await offer_direct_sign_in(console, issuer, tenant, dns, web)
    started = await run(console, tenant)
    rid = waiting_run(started.text)
    back = await browser_authorizes(issuer, tenant, authorize_url(started.text), key, "acct_test_finn",
                                    decision="deny")
    assert back.params["error"] == "access_denied" and "code" not in back.params
    done = await console.get(back.raw_path.decode())
    assert done.status_code == 200 and codes(done.text) == ["access_denied"]
    assert statuses(done.text)["signin"] == "failed" and statuses(done.text)["revoke"] == "not_run"
    assert await db.fetchval("SELECT ok FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id, rid) is False
    # The page that started it, still polling, now says the run is over.
    again = await go_on(console, rid)
    assert again.status_code == 200 and "data-run-finished" in again.text
