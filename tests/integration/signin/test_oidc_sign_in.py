"""Sign-in through the company's own OpenID Provider (a real one: npm ``oidc-provider``).

The tenant's ``login`` is an ``oidc`` connection; Device Sign-In (PAP §4.6) and Direct
Sign-In (PAP §4.5) send the browser to the IdP (authorization code flow, PKCE S256,
``state``, ``nonce``), the user logs in at the IdP's own pages, the IdP redirects to
``{issuer}/oidc/callback`` (with RFC 9207 ``iss``), and consent stays on Frontdoor's page.
Then what Frontdoor refuses: a forged ID token, a wrong ``nonce``, ``aud``, ``iss``, an
expired token, a replayed ``state`` or code, an IdP that is down; and the IdP's key
rotation followed through its JWKS.

The issuer app here is this module's own: its SSRF-safe fetcher reaches the IdP over a
real loopback socket (development policy: loopback ``http``) and the agents' metadata in
the shared `MockWeb`.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import structlog
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.signin.conftest import Company, configure, make_company, new_agent
from tests.integration.signin.test_device_pages import csrf
from tests.integration.signin.test_direct_sign_in import callback, params
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import IdpInternet, OpenIdProvider, login_at_idp, new_key

BASE = "https://issuer.frontdoor.test"
POLICY = OutboundPolicy(allow_http_loopback=True)
SECRET = "idp-secret-" + secrets.token_urlsafe(24)
PREFIX = f"oidc{secrets.token_hex(3)}-"
_slugs = itertools.count()
SLUGS = [f"{PREFIX}{i}" for i in range(80)]


def _clients() -> list[dict[str, Any]]:
    uris = [f"{BASE}/{s}/oidc/callback" for s in SLUGS]
    common = {"client_secret": SECRET, "redirect_uris": uris, "grant_types": ["authorization_code"],
              "response_types": ["code"]}
    return [{"client_id": "fd-basic", "token_endpoint_auth_method": "client_secret_basic", **common},
            {"client_id": "fd-post", "token_endpoint_auth_method": "client_secret_post", **common}]


@pytest.fixture(scope="module")
def idp() -> Iterator[OpenIdProvider]:
    provider = OpenIdProvider(_clients(), new_key("idp-1"))
    try:
        yield provider
    finally:
        provider.stop()


class Stage:
    def __init__(self, issuer: AsyncTestClient[Any], internet: IdpInternet, company: Company,
                 idp: OpenIdProvider) -> None:
        self.issuer, self.internet, self.company, self.idp = issuer, internet, company, idp

    @property
    def tenant(self) -> TenantHandle:
        return self.company.tenant

    @property
    def callback_url(self) -> str:
        return f"{self.tenant.issuer}/oidc/callback"

    async def back(self, location: str) -> Any:
        """The browser follows the IdP's redirect to Frontdoor."""
        assert location.startswith(BASE)
        return await self.issuer.get(location[len(BASE):], follow_redirects=False)

    async def device_to_idp(self, agent: TestAgent, scope: str = "poppy:read") -> tuple[dict[str, Any], str]:
        started = (await self.company.device(agent, scope)).json()
        self.issuer.cookies.clear()
        page = await self.issuer.get(f"/{self.tenant.slug}/device", params={"user_code": started["user_code"]})
        assert page.status_code == 200
        r = await self.issuer.post(f"/{self.tenant.slug}/device", data={"user_code": started["user_code"],
                                                                        "_csrf_token": csrf(page.text)},
                                   follow_redirects=False)
        assert r.status_code == 303, r.text
        return started, r.headers["location"]

    async def device_to_callback(self, agent: TestAgent, login: str = "ada") -> tuple[dict[str, Any], str]:
        started, location = await self.device_to_idp(agent)
        return started, await login_at_idp(location, login=login, stop_at=self.callback_url)

    async def consent(self, scope: list[str]) -> Any:
        consent = await self.issuer.get(f"/{self.tenant.slug}/consent")
        assert consent.status_code == 200, consent.text
        return await self.issuer.post(f"/{self.tenant.slug}/consent", data={
            "_csrf_token": csrf(consent.text), "decision": "allow", "scope": scope}, follow_redirects=False)


@asynccontextmanager
async def staged(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any,
                 web: MockWeb, idp: OpenIdProvider, *, client_id: str = "fd-basic", issuer_url: str | None = None,
                 **login: Any) -> AsyncIterator[Stage]:
    from frontdoor_issuer.app import create_app

    internet = IdpInternet(web, POLICY)
    internet.add(idp)
    tenant = await sign_up(console, slug=SLUGS[next(_slugs)])
    connection = {"type": "oidc", "issuer": issuer_url or idp.issuer, "client_id": client_id,
                  "client_secret": SECRET, **login}
    app = create_app(settings, clock=clock, fetcher=SafeFetcher(POLICY, transport=internet))
    async with AsyncTestClient(app, base_url=BASE) as issuer:
        company = await make_company(console, issuer, tenant, clock, DeviceStore(runtime.redis, clock=clock),
                                     login=connection)
        await configure(console, tenant, direct={"enabled": True, "scopes": ["poppy:read"]})
        yield Stage(issuer, internet, company, idp)


async def test_device_sign_in_through_the_idp(settings: Settings, console: AsyncTestClient[Any],
                                             clock: ShiftableClock, runtime: Any, web: MockWeb,
                                             idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        agent = new_agent(web)
        c = stage.company
        session = await c.session(agent, "alice")
        started = (await c.device(agent, "poppy:read")).json()
        stage.issuer.cookies.clear()
        page = await stage.issuer.get(f"/{c.tenant.slug}/device", params={"user_code": started["user_code"]})
        # The device page's form may end at the IdP's authorization endpoint, and only there.
        assert f"form-action 'self' {idp.issuer}" in page.headers["content-security-policy"]
        r = await stage.issuer.post(f"/{c.tenant.slug}/device", data={"user_code": started["user_code"],
                                                                      "_csrf_token": csrf(page.text)},
                                    follow_redirects=False)
        assert r.status_code == 303
        location = r.headers["location"]
        assert location.startswith(f"{idp.issuer}/auth?")
        sent = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        assert sent["code_challenge_method"] == "S256" and len(sent["code_challenge"]) == 43
        assert sent["client_id"] == "fd-basic" and sent["redirect_uri"] == stage.callback_url
        assert sent["scope"] == "openid" and sent["state"] and sent["nonce"] and sent["response_type"] == "code"

        back_url = await login_at_idp(location, login="ada", stop_at=stage.callback_url)
        back = parse_qs(urlsplit(back_url).query)
        assert back["iss"] == [idp.issuer] and back["state"] == [sent["state"]]  # RFC 9207
        r = await stage.back(back_url)
        assert r.status_code == 303 and r.headers["location"] == f"{c.tenant.issuer}/consent", r.text
        # client_secret_basic at the token endpoint, with the PKCE verifier.
        token_request = stage.internet.token_requests[-1]
        assert token_request.headers["authorization"].startswith("Basic ")
        assert b"code_verifier=" in token_request.content and SECRET.encode() not in token_request.content
        done = await stage.consent(["poppy:read"])
        assert done.status_code == 200 and "connected" in done.text

        clock.advance(seconds=6)
        token = await c.poll(agent, started["device_code"], session["session_id"])
        assert token.status_code == 200, token.text
        assert token.json()["signed_in"] is True
        assert (await c.introspect(token.json()["access_token"]))["account"] == "ada"  # the IdP's sub
        # The IdP's answer was used once: the same redirect again is refused.
        replay = await stage.back(back_url)
        assert replay.status_code == 400 and "expired" in replay.text


async def test_direct_sign_in_through_the_idp_with_client_secret_post(
        settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb,
        idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp, client_id="fd-post",
                      token_endpoint_auth_method="client_secret_post", account_claim="email") as stage:
        agent = new_agent(web)
        c = stage.company
        session = await c.session(agent, "alice")
        query, started = params(agent, scope="poppy:read")
        stage.issuer.cookies.clear()
        r = await stage.issuer.get(f"/{c.tenant.slug}/oauth/authorize", params=query, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith(f"{idp.issuer}/auth?"), r.text
        assert parse_qs(urlsplit(r.headers["location"]).query)["scope"] == ["openid email"]
        back_url = await login_at_idp(r.headers["location"], login="grace", stop_at=stage.callback_url)
        r = await stage.back(back_url)
        assert r.status_code == 303, r.text
        assert "client_secret=" in stage.internet.token_requests[-1].content.decode()
        decided = await stage.consent(["poppy:read"])
        assert decided.status_code == 303
        answer = callback(decided.headers["location"], started)
        assert answer["state"] == started.state and answer["iss"] == c.tenant.issuer
        token = await c.post_token(agent, {"grant_type": "authorization_code", "code": answer["code"],
                                           "code_verifier": started.verifier, "redirect_uri": started.redirect_uri,
                                           "session_id": session["session_id"]})
        assert token.status_code == 200, token.text
        # account_claim "email", verified at the IdP.
        assert (await c.introspect(token.json()["access_token"]))["account"] == "grace@corp.example"


async def test_an_unverified_email_signs_nobody_in(settings: Settings, console: AsyncTestClient[Any],
                                                  clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                  idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp, account_claim="email") as stage:
        _, back_url = await stage.device_to_callback(new_agent(web), login="unverified-bob")
        r = await stage.back(back_url)
        assert r.status_code == 400 and "could not confirm" in r.text
        assert (await stage.issuer.get(f"/{stage.tenant.slug}/consent")).status_code == 400


def _forged(claims: dict[str, Any]) -> dict[str, Any]:
    return claims


TAMPERING = {
    "wrong_nonce": lambda c: {**c, "nonce": "another-" + secrets.token_urlsafe(8)},
    "wrong_aud": lambda c: {**c, "aud": "someone-else"},
    "wrong_iss": lambda c: {**c, "iss": "http://127.0.0.1:1"},
    "expired": lambda c: {**c, "exp": c["iat"] - 3600, "iat": c["iat"] - 3700},
    "two_audiences_no_azp": lambda c: {k: v for k, v in {**c, "aud": [c["aud"], "other"]}.items() if k != "azp"},
}


# Which check refused each (the logged reason, never a claim's value).
REASONS = {"wrong_nonce": "nonce", "wrong_aud": "audience", "wrong_iss": "issuer", "expired": "expired",
           "two_audiences_no_azp": "azp", "forged": "signature"}


@pytest.mark.parametrize("case", [*TAMPERING, "forged"])
async def test_bad_id_tokens_are_refused(case: str, settings: Settings, console: AsyncTestClient[Any],
                                         clock: ShiftableClock, runtime: Any, web: MockWeb,
                                         idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        agent = new_agent(web)
        session = await stage.company.session(agent, "alice")
        started, back_url = await stage.device_to_callback(agent)
        if case == "forged":  # same kid, another key: the signature does not verify
            stage.internet.tamper, stage.internet.sign_with = _forged, new_key("idp-1")
        else:
            stage.internet.tamper = TAMPERING[case]
        with structlog.testing.capture_logs() as logs:
            r = await stage.back(back_url)
        assert r.status_code == 400 and "could not confirm" in r.text, r.text
        refused = [e for e in logs if e["event"] == "oidc_login_failed"]
        assert refused and refused[0]["reason"] == "id_token" and refused[0]["check"] == REASONS[case]
        assert (await stage.issuer.get(f"/{stage.tenant.slug}/consent")).status_code == 400
        clock.advance(seconds=6)
        poll = await stage.company.poll(agent, started["device_code"], session["session_id"])
        assert poll.json()["error"] == "authorization_pending"


async def test_cancelled_login_is_access_denied(settings: Settings, console: AsyncTestClient[Any],
                                               clock: ShiftableClock, runtime: Any, web: MockWeb,
                                               idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        agent = new_agent(web)
        c = stage.company
        # Device: the user aborts at the IdP; the agent's poll gets the protocol's access_denied.
        session = await c.session(agent, "alice")
        started, location = await stage.device_to_idp(agent)
        back_url = await login_at_idp(location, login="ada", stop_at=stage.callback_url, cancel=True)
        assert parse_qs(urlsplit(back_url).query)["error"] == ["access_denied"]
        page = await stage.back(back_url)
        assert page.status_code == 200 and "You did not sign in" in page.text
        clock.advance(seconds=6)
        poll = await c.poll(agent, started["device_code"], session["session_id"])
        assert poll.status_code == 400 and poll.json()["error"] == "access_denied"
        # Direct: the browser goes back to the agent with error=access_denied, state and iss.
        query, direct = params(agent, scope="poppy:read")
        stage.issuer.cookies.clear()
        r = await stage.issuer.get(f"/{c.tenant.slug}/oauth/authorize", params=query, follow_redirects=False)
        back_url = await login_at_idp(r.headers["location"], login="ada", stop_at=stage.callback_url, cancel=True)
        r = await stage.back(back_url)
        assert r.status_code == 303
        answer = callback(r.headers["location"], direct)
        assert answer["error"] == "access_denied" and answer["state"] == direct.state
        assert answer["iss"] == c.tenant.issuer and "code" not in answer


async def test_replayed_code_and_foreign_state_are_refused(settings: Settings, console: AsyncTestClient[Any],
                                                          clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                          idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        agent = new_agent(web)
        _, first = await stage.device_to_callback(agent)
        assert (await stage.back(first)).status_code == 303
        # A new sign-in in this browser, answered with the first one's (used) code.
        _, second = await stage.device_to_callback(agent)
        old_code = parse_qs(urlsplit(first).query)["code"][0]
        new_state = parse_qs(urlsplit(second).query)["state"][0]
        replay = f"{stage.callback_url}?code={old_code}&state={new_state}&iss={idp.issuer}"
        with structlog.testing.capture_logs() as logs:
            r = await stage.back(replay)
        assert r.status_code == 400 and "could not confirm" in r.text
        assert [e["reason"] for e in logs if e["event"] == "oidc_login_failed"] == ["token_refused"]
        # Another browser's state: refused, and not usable by its own browser afterwards either.
        _, third = await stage.device_to_callback(agent)
        stage.issuer.cookies.clear()
        other = await stage.back(third)
        assert other.status_code == 400  # no flow in this browser at all
        _, fourth = await stage.device_to_callback(agent)
        foreign = f"{stage.callback_url}?{urlsplit(third).query}"  # the other browser's answer, in this one
        with structlog.testing.capture_logs() as logs:
            assert (await stage.back(foreign)).status_code == 400
        assert [e["reason"] for e in logs if e["event"] == "oidc_login_failed"] == ["other_browser"]
        assert (await stage.back(fourth)).status_code == 303  # its own answer still works


async def test_idp_down(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any,
                        web: MockWeb, idp: OpenIdProvider) -> None:
    # Nothing listens at the issuer: the device page says so, Direct answers temporarily_unavailable.
    async with staged(settings, console, clock, runtime, web, idp, issuer_url="http://127.0.0.1:9") as stage:
        agent = new_agent(web)
        started = (await stage.company.device(agent, "poppy:read")).json()
        stage.issuer.cookies.clear()
        page = await stage.issuer.get(f"/{stage.tenant.slug}/device")
        r = await stage.issuer.post(f"/{stage.tenant.slug}/device", data={"user_code": started["user_code"],
                                                                          "_csrf_token": csrf(page.text)})
        assert r.status_code == 503 and "not available" in r.text
        query, direct = params(agent, scope="poppy:read")
        r = await stage.issuer.get(f"/{stage.tenant.slug}/oauth/authorize", params=query, follow_redirects=False)
        assert callback(r.headers["location"], direct)["error"] == "temporarily_unavailable"


async def test_idp_down_after_the_login(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock,
                                        runtime: Any, web: MockWeb) -> None:
    own = OpenIdProvider(_clients(), new_key("idp-1"))
    try:
        async with staged(settings, console, clock, runtime, web, own) as stage:
            _, back_url = await stage.device_to_callback(new_agent(web))
            own.stop()
            r = await stage.back(back_url)
            assert r.status_code == 502 and "could not reach" in r.text
    finally:
        own.stop()


async def test_key_rotation_at_the_idp(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock,
                                       runtime: Any, web: MockWeb) -> None:
    own = OpenIdProvider(_clients(), new_key("idp-1"))
    try:
        async with staged(settings, console, clock, runtime, web, own) as stage:
            _, back_url = await stage.device_to_callback(new_agent(web))
            assert (await stage.back(back_url)).status_code == 303  # keys fetched and cached
            own.restart(new_key("idp-2"))  # the IdP now signs with a key Frontdoor has not seen
            _, back_url = await stage.device_to_callback(new_agent(web))
            r = await stage.back(back_url)
            assert r.status_code == 303, r.text  # unknown kid: the JWKS was refetched once
            assert r.headers["location"].endswith("/consent")
    finally:
        own.stop()


