"""Mediated Sign-In (PAP §4.7) on the wire: agent → Frontdoor → the company's relay.

The company's relay is played by a handler on the shared `MockWeb`: it verifies the
signed relay request with the tenant's JWKS and answers like Northwind would.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import structlog
from joserfc import jwt
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.signin.conftest import Company, assert_refusal, configure, make_company
from tests.support.agent import TestAgent
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb

PASSWORD = "correct-horse-" + secrets.token_urlsafe(8)
CODE = "482913"


class Relay:
    """The company's relay endpoint: two accounts, one of which needs a one-time code."""

    def __init__(self, host: str, issuer: AsyncTestClient[Any], tenant: TenantHandle) -> None:
        self.host, self.issuer, self.tenant = host, issuer, tenant
        self.claims: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.jwks: dict[str, Any] = {}

    @property
    def url(self) -> str:
        return f"https://{self.host}/pap/relay"

    async def answer(self, request: httpx.Request) -> httpx.Response:
        self.raw.append(request.content)
        token = jwt.decode(request.content.decode(), KeySet.import_key_set(self.jwks),  # type: ignore[arg-type]
                           algorithms=["ES256"])
        assert token.header["typ"] == "frontdoor-mediated+jwt"
        c = dict(token.claims)
        assert c["iss"] == self.tenant.issuer and c["aud"] == f"https://{self.host}" and c["exp"] - c["iat"] <= 60
        self.claims.append(c)
        if "code" in c:
            body = {"status": "complete", "account": "acct-otp"} if (c["sign_in_id"], c["code"]) == ("c-1", CODE) \
                else {"status": "code_required", "sign_in_id": "c-1"}
        elif c["fields"] == {"email": "ada@example.com", "password": PASSWORD}:
            body = {"status": "complete", "account": "acct-ada"}
        elif c["fields"] == {"email": "otp@example.com", "password": PASSWORD}:
            body = {"status": "code_required", "sign_in_id": "c-1", "sent_to": "o***@example.com"}
        else:
            body = {"status": "failed"}
        return httpx.Response(200, json=body)


@pytest.fixture
def relay(web: MockWeb, issuer: AsyncTestClient[Any], tenant: TenantHandle) -> Iterator[Relay]:
    r = Relay(f"{unique('relay-')}.example", issuer, tenant)
    original = web.handle_async_request

    async def route(request: httpx.Request) -> httpx.Response:
        if request.url.host == r.host:
            return await r.answer(request)
        return await original(request)

    web.handle_async_request = route  # type: ignore[method-assign]
    yield r
    web.handle_async_request = original  # type: ignore[method-assign]


MEDIATED_FIELDS = [{"name": "email", "label": "Email", "secret": False},
                   {"name": "password", "label": "Password", "secret": True}]


@pytest.fixture
async def mediated(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any,
                   store: Any, relay: Relay) -> Company:
    c = await make_company(console, issuer, tenant, clock, store, mediated={
        "enabled": True, "scopes": ["poppy:read"], "relay_url": relay.url, "fields": MEDIATED_FIELDS,
        "attempts_per_user_per_minute": 4})
    relay.jwks = (await issuer.get(f"/{tenant.slug}/jwks.json")).json()  # the relay's cached copy
    return c


async def _post(c: Company, agent: TestAgent, token: str, body: Any, sign_in_id: str | None = None) -> Any:
    path = "/oauth/mediated" + (f"/{sign_in_id}" if sign_in_id else "")
    url = f"{c.tenant.issuer}{path}"
    return await c.issuer.post(f"/{c.tenant.slug}{path}", content=json.dumps(body), headers={
        "Content-Type": "application/json", "Authorization": f"DPoP {token}",
        "DPoP": agent.dpop("POST", url, token=token, iat=c.now())})


def _creds(email: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"scope": "poppy:read", "credentials": {"email": email, "password": password}}


async def test_off_by_default_and_listed_in_poppy_json_when_on(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent) -> None:
    s = await company.session(agent, "u1")
    r = await _post(company, agent, s["access_token"], _creds("ada@example.com"))
    assert r.status_code == 404
    current = (await console.get("/api/v1/issuer", headers=company.tenant.auth)).json()["settings"]
    assert current["mediated"]["enabled"] is False
    bad = await console.put("/api/v1/issuer", headers=company.tenant.auth, json={
        **current, "mediated": {"enabled": True, "scopes": ["poppy:read"], "fields": MEDIATED_FIELDS,
                                "relay_url": "http://relay.example/x"}})
    assert bad.status_code in (400, 422) and "mediated.relay_url" in bad.text


async def test_complete_signs_the_session_in_and_relays_once(mediated: Company, agent: TestAgent,
                                                            relay: Relay) -> None:
    s = await mediated.session(agent, "u1")
    r = await _post(mediated, agent, s["access_token"], _creds("ada@example.com"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "complete" and body["signed_in"] is True and body["session_id"] == s["session_id"]
    assert body["scope"] == "poppy:read" and body["token_type"] == "DPoP" and body["refresh_token"]
    assert r.headers["cache-control"] == "no-store" and PASSWORD not in r.text
    assert (await mediated.introspect(body["access_token"]))["active"] is True
    assert relay.claims[-1]["client_id"] == agent.client_id and relay.claims[-1]["scope"] == "poppy:read"
    refreshed = await mediated.refresh(agent, body["refresh_token"], session_id=s["session_id"])
    assert refreshed.status_code == 200, refreshed.text


async def test_unknown_account_and_wrong_password_get_the_same_answer(mediated: Company, agent: TestAgent) -> None:
    s = await mediated.session(agent, "u2")
    wrong = await _post(mediated, agent, s["access_token"], _creds("ada@example.com", "nope"))
    unknown = await _post(mediated, agent, s["access_token"], _creds("nobody@example.com"))
    assert wrong.status_code == unknown.status_code == 200
    assert wrong.json() == unknown.json() == {"status": "failed"}
    assert "nope" not in wrong.text


async def test_one_time_code_step(mediated: Company, agent: TestAgent, web: MockWeb) -> None:
    s = await mediated.session(agent, "u3")
    r = await _post(mediated, agent, s["access_token"], _creds("otp@example.com"))
    first = r.json()
    assert first["status"] == "code_required" and first["code"] == {"sent_to": "o***@example.com"}
    sid = first["sign_in_id"]
    assert sid != "c-1"  # Frontdoor's own reference, never the company's
    other = await mediated.session(agent, "u4")
    stolen = await _post(mediated, agent, other["access_token"], {"code": CODE}, sid)
    assert_refusal(stolen, 404, "sign_in_not_found")
    again = await _post(mediated, agent, s["access_token"], {"code": "000000"}, sid)
    assert again.json()["status"] == "code_required"
    done = await _post(mediated, agent, s["access_token"], {"code": CODE}, sid)
    assert done.json()["status"] == "complete" and done.json()["signed_in"] is True, done.text
    used = await _post(mediated, agent, s["access_token"], {"code": CODE}, sid)
    assert_refusal(used, 404, "sign_in_not_found")


async def test_refusals_scope_fields_rate_limit(mediated: Company, agent: TestAgent) -> None:
    s = await mediated.session(agent, "u5")
    tok = s["access_token"]
    await room_in_window(60, needed_s=15)  # the 5 attempts fall in one minute of the per-user limit
    assert_refusal(await _post(mediated, agent, tok, {**_creds("a@b.c"), "scope": "poppy:write"}), 400,
                   "invalid_scope")
    extra = {"scope": "poppy:read", "credentials": {"email": "a@b.c", "password": "x", "pin": "1"}}
    assert_refusal(await _post(mediated, agent, tok, extra), 400, "invalid_request")
    answers = [await _post(mediated, agent, tok, _creds("ada@example.com", "bad")) for _ in range(5)]
    assert [a.status_code for a in answers[:4]] == [200] * 4
    assert_refusal(answers[4], 429, "rate_limited")
    assert int(answers[4].headers["retry-after"]) > 0
    bare = await mediated.issuer.post(f"/{mediated.tenant.slug}/oauth/mediated", content=b"{}",
                                      headers={"Content-Type": "application/json"})
    assert bare.status_code == 401


async def test_a_mediated_sign_in_leaves_no_secret_in_logs_or_spans(
        mediated: Company, agent: TestAgent, relay: Relay, capfd: pytest.CaptureFixture[str]) -> None:
    code = CODE
    with capture_spans() as spans, capture_logs() as buf:
        s = await mediated.session(agent, "u6")
        await _post(mediated, agent, s["access_token"], _creds("ada@example.com", PASSWORD + "x"))
        started = (await _post(mediated, agent, s["access_token"], _creds("otp@example.com"))).json()
        done = await _post(mediated, agent, s["access_token"], {"code": code}, started["sign_in_id"])
        structlog.get_logger("frontdoor.test").warning("mediated_probe")
    assert done.json()["status"] == "complete"
    captured = capfd.readouterr()
    text = "\n".join([buf.getvalue(), captured.out, captured.err, spans.text()])
    assert "mediated_probe" in text and spans.spans
    for secret in (PASSWORD, code, done.json()["refresh_token"], s["access_token"]):
        assert secret not in text


async def test_an_unusable_relay_answer_is_503(mediated: Company, agent: TestAgent, relay: Relay,
                                              console: AsyncTestClient[Any]) -> None:
    s = await mediated.session(agent, "u7")

    async def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": "https://elsewhere.example/"})

    relay.answer = broken  # type: ignore[method-assign]
    r = await _post(mediated, agent, s["access_token"], _creds("ada@example.com"))
    assert r.status_code == 503 and PASSWORD not in r.text
    _ = configure
