"""No code, token, assertion, handoff message or password in logs or spans after a full sign-in.

One Device Sign-In through the real pages: the agent starts a Session and a device
authorization and polls; the user mistypes a code, opens the link, is sent to Northwind's
login page (in-process, the real one) with the signed request, mistypes the password,
signs in, and Northwind's signed response goes back to Frontdoor's callback; the user
consents. Then the whole Account Token lifecycle: introspection, a refresh (rotation), a
replayed old token, revocation, a second sign-in and a disconnect by the company.

Capture is that of ``tests/integration/console/test_log_redaction.py``: the app's own
logging pipeline re-pointed at a buffer (level debug), a span collector, and ``capfd``
for anything written to the process's stdout/stderr by another route. A probe line
proves the capture sees the pipeline's lines.
"""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import structlog
from frontdoor_sdk import login_signing_key
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.signin.conftest import configure, make_company
from tests.support.agent import TestAgent

NORTHWIND = "https://northwind.example"
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def _csrf(page: str) -> str:
    m = re.search(r'name="_csrf_token" value="([^"]+)"', page)
    assert m, page[:500]
    return m.group(1)


class Recorder:
    """Everything secret this test makes or sees, by name (JWTs also by their signature)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def add(self, name: str, value: str) -> str:
        assert value, name
        self.values[f"{name}#{len(self.values)}"] = value
        if value.count(".") == 2 and value.startswith("eyJ"):
            self.values[f"{name} signature#{len(self.values)}"] = value.rsplit(".", 1)[1]
        return value

    def wrap(self, name: str, fn: Callable[..., str]) -> Callable[..., str]:
        def recorded(*args: Any, **kwargs: Any) -> str:
            return self.add(name, fn(*args, **kwargs))

        return recorded


def forwarding_client(issuer: AsyncTestClient[Any]) -> httpx.AsyncClient:
    async def forward(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        r = await issuer.request(request.method, request.url.raw_path.decode(), content=request.content,
                                 headers=headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return httpx.AsyncClient(transport=httpx.MockTransport(forward))


async def test_a_full_sign_in_leaves_no_secret_in_logs_or_spans(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: Any, store: Any, capfd: pytest.CaptureFixture[str],
) -> None:
    seen = Recorder()
    agent.client_assertion = seen.wrap("client assertion", agent.client_assertion)  # type: ignore[method-assign]
    agent.session_assertion = seen.wrap("session assertion", agent.session_assertion)  # type: ignore[method-assign]
    agent.dpop = seen.wrap("DPoP proof", agent.dpop)  # type: ignore[method-assign]
    password = seen.add("password", f"nw-{secrets.token_urlsafe(12)}")
    wrong_password = seen.add("wrong password", f"nw-{secrets.token_urlsafe(12)}")
    key = login_signing_key()
    public = {**key.as_dict(private=False), "kid": key.kid}
    company = await make_company(console, issuer, tenant, clock, store,
                                 custom_scopes={"orders:read": "See your orders"},
                                 login={"url": f"{NORTHWIND}/login", "public_jwk": public})
    await configure(console, tenant, device={"enabled": True, "scopes": ["orders:read", "poppy:read"]})
    seen.add("resource-server credential", company.credential)

    async with forwarding_client(issuer) as to_issuer:
        northwind = create_app(NorthwindConfig(
            issuer=tenant.issuer, credential=company.credential, public_url=NORTHWIND,
            poppy={"auth": {"issuer": tenant.issuer}}, http_client=to_issuer, clock=clock, signing_key=key,
            demo_password=password))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(northwind), base_url=NORTHWIND) as at_northwind:
            with capture_spans() as spans, capture_logs() as buf:
                await _full_sign_in(company, agent, issuer, at_northwind, seen, tenant, password, wrong_password)
                structlog.get_logger("frontdoor.test").warning("redaction_probe", device_code=password)
    captured = capfd.readouterr()

    logs = buf.getvalue()
    assert "redaction_probe" in logs and password not in logs.split("redaction_probe")[1][:200]
    assert len(spans.spans) > 20  # every request above made spans
    text = "\n".join([logs, captured.out, captured.err, spans.text()])
    leaked = sorted({name.split("#")[0] for name, value in seen.values.items() if value in text})
    assert not leaked, f"secrets in logs/spans: {leaked}"


async def _full_sign_in(company: Any, agent: TestAgent, issuer: AsyncTestClient[Any],
                        at_northwind: httpx.AsyncClient, seen: Recorder, tenant: TenantHandle, password: str,
                        wrong_password: str) -> None:
    session = await company.session(agent, "alice")
    seen.add("Session Token", session["access_token"])
    started = (await company.device(agent, "orders:read poppy:read")).json()
    seen.add("device code", started["device_code"])
    seen.add("user code", started["user_code"])
    seen.add("user code (typed)", started["user_code"].replace("-", ""))
    pending = await company.poll(agent, started["device_code"], session["session_id"])
    assert pending.json()["error"] == "authorization_pending"

    # The user: a wrong code first, then the link.
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device", params={"user_code": started["user_code"]})
    bad = await issuer.post(f"/{tenant.slug}/device", data={"user_code": seen.add("wrong code", "BBBB-CCCC"),
                                                             "_csrf_token": _csrf(page.text)})
    assert bad.status_code == 400
    r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"],
                                                           "_csrf_token": _csrf(page.text)}, follow_redirects=False)
    assert r.status_code == 303, r.text
    flow_cookie = issuer.cookies.get("fd_flow")
    if flow_cookie:
        seen.add("flow cookie", flow_cookie)
    login_url = r.headers["location"]
    request_jwt = seen.add("login request JWT", parse_qs(urlsplit(login_url).query)["request"][0])

    # Northwind's login page: a wrong password, then the right one.
    form = await at_northwind.get(f"/login?request={request_jwt}")
    assert form.status_code == 200, form.text
    fields = {k: html.unescape(v) for k, v in HIDDEN.findall(form.text)}
    wrong = await at_northwind.post("/login", data={**fields, "email": "ada@northwind.example",
                                                    "password": wrong_password})
    assert wrong.status_code == 401
    handoff = await at_northwind.post("/login", data={**fields, "email": "ada@northwind.example",
                                                      "password": password})
    assert handoff.status_code == 200, handoff.text
    response_jwt = seen.add("login response JWT", html.unescape(dict(HIDDEN.findall(handoff.text))["response"]))

    r = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response_jwt}, follow_redirects=False)
    assert r.status_code == 303, r.text
    consent = await issuer.get(f"/{tenant.slug}/consent")
    done = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": _csrf(consent.text),
                                                               "scope": ["orders:read"], "decision": "allow"})
    assert done.status_code == 200 and "connected" in done.text
    replay = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response_jwt})
    assert replay.status_code == 400

    # The agent: signed in, then the Account Token's whole life.
    company.clock.advance(seconds=6)
    signed = await company.poll(agent, started["device_code"], session["session_id"])
    assert signed.status_code == 200, signed.text
    tokens = signed.json()
    seen.add("Session Token (signed in)", tokens["access_token"])
    first = seen.add("Account Token", tokens["refresh_token"])
    used = await company.poll(agent, started["device_code"], session["session_id"])
    assert used.json()["error"] == "invalid_grant"
    assert (await company.introspect(tokens["access_token"]))["account"] == "acct_ada"
    refreshed = await company.refresh(agent, first, session_id=session["session_id"])
    assert refreshed.status_code == 200, refreshed.text
    seen.add("Session Token (refreshed)", refreshed.json()["access_token"])
    second = seen.add("Account Token (rotated)", refreshed.json().get("refresh_token") or first)
    narrowed = await company.refresh(agent, second, scope="poppy:read")  # wider than granted
    assert narrowed.json()["error"] == "invalid_scope"
    if second != first:
        reused = await company.refresh(agent, first)  # a replaced token: refused, the family revoked
        assert reused.json()["error"] == "invalid_grant"
    assert (await company.revoke(agent, second)).status_code == 200
    assert (await company.revoke(agent, seen.add("unknown token", "fdat_" + secrets.token_urlsafe(32)))
            ).status_code == 200

    # A second sign-in, disconnected by the company's account page (its resource-server credential).
    again = await company.sign_in(agent, "alice", "acct_ada", scope="orders:read", granted="orders:read")
    seen.add("Session Token (second sign-in)", again["access_token"])
    seen.add("Account Token (second sign-in)", again["refresh_token"])
    auth = {"Authorization": f"Bearer {company.credential}"}
    listed = await issuer.get(f"/{tenant.slug}/accounts/acct_ada/agents", headers=auth)
    assert [a["client_id"] for a in listed.json()["agents"]] == [agent.client_id]
    r = await issuer.post(f"/{tenant.slug}/accounts/disconnect", json={"account": "acct_ada"}, headers=auth)
    assert r.status_code == 200 and r.json()["sessions_signed_out"] == 1
    gone = await company.refresh(agent, again["refresh_token"])
    assert gone.json()["error"] == "invalid_grant"
