"""The agent simulator's Device Sign-In (issue #19 §1, PAP §4.6, RFC 8628) at the wire level.

A real issuer and console; the simulator's requests go over HTTP through the SSRF-safe
fetcher (MockWeb carries them to the issuer's ASGI app). The run stops at the sign-in with
the link and user code on the page; a test "user" signs in the way a browser does, through
the issuer's device page, the company's login handoff (ADR 0002) and the consent page; the
page's Continue polls the ``device_code`` grant (never before the issuer's interval) until
the Account Token is granted, then revokes it (RFC 7009) and finds it refused.

Covers: the whole run green and recorded; the waiting state KEK-encrypted in Redis, the
device code, tokens and DPoP key never on the page; a denial, an expired code and a tenant
without Device Sign-In, each with its finding; viewers and another tenant's admin unable
to continue a run.
"""

from __future__ import annotations

import contextlib
import html
import re
from typing import Any

import httpx
from frontdoor_core.redis_keys import shard
from frontdoor_core.runtime import Runtime
from frontdoor_sdk import login_signing_key
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.integration.console.test_simulator import codes, run, statuses, steps, wire
from tests.integration.issuer.test_pap10_publish_check import publish_all
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
                web: MockWeb, *, device: bool = True) -> Any:
    key = await offer_device_sign_in(console, t) if device else None
    domain = await verified_domain(console, t, dns)
    await publish_all(console, issuer, t, web, domain)
    await wire(web, console, issuer, t)
    return key


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
    key = await ready(console, issuer, tenant, dns, web)
    answers = record_answers(web, issuer, tenant)
    started = await run(console, tenant)
    assert started.status_code == 200, started.text
    assert statuses(started.text) == {"discovery": "passed", "session": "passed", "api": "not_run",
                                      "signin": "informational", "revoke": "not_run", "refused": "not_run"}, \
        codes(started.text)
    rid = waiting_run(started.text)
    device = answered(answers, "oauth/device")[0]
    assert user_code(started.text) == device["user_code"]
    assert f'href="{device["verification_uri_complete"]}" target="_blank"' in started.text
    assert device["verification_uri"] == f"{tenant.issuer}/device"
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
                                   "signin": "passed", "revoke": "passed", "refused": "passed"}, codes(done.text)
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
    assert [(s["key"], s["status"]) for s in row["steps"]][3:] == [("signin", "passed"), ("revoke", "passed"),
                                                                   ("refused", "passed")]
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
    key = await ready(console, issuer, tenant, dns, web)
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
    assert codes(r.text) == ["device_sign_in_not_offered"]
    assert statuses(r.text)["signin"] == "informational" and statuses(r.text)["revoke"] == "not_run"
    assert "data-sign-in-prompt" not in r.text and "sign-in.md" in r.text
    assert steps(r.text)["session"] == "yes"


async def test_viewers_and_other_tenants_cannot_continue_a_run(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, web: MockWeb, clock: ShiftableClock, runtime: Runtime, db: Any,
) -> None:
    key = await ready(console, issuer, tenant, dns, web)
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
