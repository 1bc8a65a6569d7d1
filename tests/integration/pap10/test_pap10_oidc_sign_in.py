"""PAP 1.0 sign-in through the company's OpenID Provider (a real one: npm ``oidc-provider``).

The tenant's ``login`` is an ``oidc`` connection; the agent is the independent 1.0 agent
(tests/support/pap10_agent.py), which signs in without a Session [S §5]: Direct Sign-In
(PKCE S256, ``state``, RFC 9207 ``iss``, the code redeemed without ``session_id``) and
Device Sign-In (RFC 8628, polled without ``session_id``). The user's browser goes from
Frontdoor to the IdP's own login and consent pages and back to ``{issuer}/oidc/callback``,
then to Frontdoor's consent page. The 1.0 answer is an RFC 9068 access token whose ``sub``
is the account the connection's ``account_claim`` took from the IdP's ID token, and a
refresh token; the sign-in keeps the IdP session (``sid``), so the IdP's own back-channel
logout ends it. The issuer app and its outbound network are `test_oidc_sign_in`'s (`staged`):
the IdP over a real loopback socket, the agent's CIMD and JWKS in `MockWeb`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from frontdoor_core.settings import Settings
from frontdoor_sessions.oidc_id_token import idp_session_hash
from joserfc import jws, jwt
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.integration.pap10.conftest import Network, discovery_of, new_agent
from tests.integration.signin.test_device_pages import csrf
from tests.integration.signin.test_oidc_sign_in import BASE, SECRET, SLUGS, Stage, staged
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import FrontdoorStandIn, OpenIdProvider, login_at_idp, logout_at_idp, new_key
from tests.support.pap10_agent import Discovery, Pap10Agent, SignInError

SCOPE = "poppy:read"


@pytest.fixture(scope="module")
def catcher() -> Iterator[FrontdoorStandIn]:
    caught = FrontdoorStandIn()
    try:
        yield caught
    finally:
        caught.stop()


@pytest.fixture(scope="module")
def idp(catcher: FrontdoorStandIn) -> Iterator[OpenIdProvider]:
    """``fd-10`` gets ``sid`` in its ID tokens and the IdP's logout tokens (session required)."""
    client = {"client_id": "fd-10", "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic",
              "redirect_uris": [f"{BASE}/{s}/oidc/callback" for s in SLUGS], "grant_types": ["authorization_code"],
              "response_types": ["code"], "backchannel_logout_uri": catcher.logout_url,
              "backchannel_logout_session_required": True}
    provider = OpenIdProvider([client], new_key("idp-10-1"))
    try:
        yield provider
    finally:
        provider.stop()


class Pap10Stage:
    """A `Stage` seen by a 1.0 agent: its own HTTP client to the issuer, its discovery."""

    def __init__(self, stage: Stage, agent: Pap10Agent, http: httpx.AsyncClient, found: Discovery) -> None:
        self.stage, self.agent, self.http, self.found = stage, agent, http, found

    async def claims(self, access_token: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The access token's header and claims, its signature verified with the issuer's JWKS."""
        jwks_uri = str(self.found.issuer_metadata["jwks_uri"])
        keys = KeySet.import_key_set((await self.http.get(jwks_uri)).json())
        header = jws.extract_compact(access_token.encode()).headers()
        return header, dict(jwt.decode(access_token, keys).claims)

    async def sign_in_row(self, runtime: Any, sign_in_id: str) -> Any:
        async with runtime.pool.acquire() as conn:
            return await conn.fetchrow("SELECT type, profile, account_id, user_id, scope, idp_session, revoked_at"
                                       " FROM sign_ins WHERE tenant_id = $1 AND id = $2",
                                       self.stage.tenant.id, sign_in_id)

    def idp_sid(self) -> str:
        """The ``sid`` of the ID token the IdP last answered Frontdoor with."""
        return str(jwt.decode(self.stage.internet.id_tokens[-1], self.stage.idp.key).claims["sid"])


@asynccontextmanager
async def staged10(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any,
                   web: MockWeb, idp: OpenIdProvider, **login: Any) -> AsyncIterator[Pap10Stage]:
    async with staged(settings, console, clock, runtime, web, idp, client_id="fd-10", **login) as stage:
        meta = (await stage.issuer.get(f"/.well-known/oauth-authorization-server/{stage.tenant.slug}")).json()
        assert meta["issuer"] == stage.tenant.issuer
        async with httpx.AsyncClient(transport=Network({"issuer.frontdoor.test": stage.issuer}, web)) as http:
            yield Pap10Stage(stage, new_agent(web, clock), http, discovery_of(meta))


async def direct_to_agent(s: Pap10Stage, browser: httpx.AsyncClient, login: str = "ada") -> tuple[Any, str]:
    """Direct Sign-In in the user's browser: Frontdoor → IdP login and consent → Frontdoor's consent → the agent."""
    pending = s.agent.authorize(s.found, SCOPE)
    assert pending.url.startswith(f"{s.stage.tenant.issuer}/oauth/authorize?")
    s.stage.issuer.cookies.clear()
    r = await s.stage.issuer.get(pending.url[len(BASE):], follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(f"{s.stage.idp.issuer}/auth?"), r.text
    sent = {k: v[0] for k, v in parse_qs(urlsplit(r.headers["location"]).query).items()}
    assert sent["client_id"] == "fd-10" and sent["code_challenge_method"] == "S256" and sent["nonce"]
    back_url = await login_at_idp(r.headers["location"], login=login, stop_at=s.stage.callback_url, browser=browser)
    r = await s.stage.back(back_url)
    assert r.status_code == 303 and r.headers["location"] == f"{s.stage.tenant.issuer}/consent", r.text
    decided = await s.stage.consent([SCOPE])
    assert decided.status_code == 303, decided.text
    location = decided.headers["location"]
    assert location.startswith(f"{s.agent.redirect_uri}?"), location
    return pending, location


async def test_direct_sign_in_under_1_0_through_the_idp(settings: Settings, console: AsyncTestClient[Any],
                                                        clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                        idp: OpenIdProvider, catcher: FrontdoorStandIn) -> None:
    async with (staged10(settings, console, clock, runtime, web, idp, backchannel_logout=True) as s,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser):
        pending, returned = await direct_to_agent(s, browser)
        back = {k: v[0] for k, v in parse_qs(urlsplit(returned).query).items()}
        assert set(back) == {"code", "state", "iss"} and back["iss"] == s.found.issuer  # RFC 9207, [S §5]
        r = await s.agent.redeem(s.http, s.found, pending, returned)  # no session_id [S §5]
        assert r.status_code == 200, r.text
        body = r.json()
        # ADR 0004 §4: an RFC 9068 access token and a refresh token; no Session in the answer.
        assert body["token_type"].lower() == "bearer" and body["refresh_token"].startswith("fdat_")
        assert "session_id" not in body and "signed_in" not in body and body["scope"] == SCOPE
        header, claims = await s.claims(body["access_token"])
        assert header["typ"] == "at+jwt" and claims["token_use"] == "access"
        # The account is the IdP's sub (account_claim "sub"), for this agent, with what the user allowed.
        assert claims["sub"] == "ada" and claims["client_id"] == s.agent.client_id and claims["scope"] == SCOPE
        assert claims["iss"] == s.stage.tenant.issuer
        row = await s.sign_in_row(runtime, claims["sgn"])
        assert (row["type"], row["profile"], row["account_id"]) == ("direct", "1.0", "ada")
        # The IdP session came through the 1.0 path: its hash is kept with the sign-in, never the sid.
        sid = s.idp_sid()
        assert row["idp_session"] == idp_session_hash(idp.issuer, sid) and sid not in row["idp_session"]

        refreshed = await s.agent.refresh(s.http, s.found)
        assert refreshed.status_code == 200, refreshed.text
        assert (await s.claims(refreshed.json()["access_token"]))[1]["sub"] == "ada"

        # Ada signs out at the IdP: its logout token (sub and sid) ends this 1.0 sign-in.
        catcher.tokens.clear()
        await logout_at_idp(browser, idp)
        assert len(catcher.tokens) == 1
        r = await s.stage.issuer.post(f"/{s.stage.tenant.slug}/oidc/backchannel-logout",
                                      data={"logout_token": catcher.tokens[0]})
        assert r.status_code == 200, r.text
        assert (await s.sign_in_row(runtime, claims["sgn"]))["revoked_at"] is not None
        after = await s.agent.refresh(s.http, s.found)
        assert after.status_code == 400 and after.json()["error"] == "invalid_grant", after.text


async def test_device_sign_in_under_1_0_through_the_idp(settings: Settings, console: AsyncTestClient[Any],
                                                        clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                        idp: OpenIdProvider) -> None:
    async with (staged10(settings, console, clock, runtime, web, idp) as s,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser):
        started = await s.agent.start_device(s.http, s.found, SCOPE)  # client-authenticated, no Session
        pending = await s.agent.poll_device(s.http, s.found, started["device_code"])
        assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending", pending.text
        slug = s.stage.tenant.slug
        s.stage.issuer.cookies.clear()
        page = await s.stage.issuer.get(f"/{slug}/device", params={"user_code": started["user_code"]})
        assert page.status_code == 200
        r = await s.stage.issuer.post(f"/{slug}/device", data={"user_code": started["user_code"],
                                                               "_csrf_token": csrf(page.text)}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith(f"{idp.issuer}/auth?"), r.text
        back_url = await login_at_idp(r.headers["location"], login="ada", stop_at=s.stage.callback_url,
                                      browser=browser)
        r = await s.stage.back(back_url)
        assert r.status_code == 303 and r.headers["location"] == f"{s.stage.tenant.issuer}/consent", r.text
        done = await s.stage.consent([SCOPE])
        assert done.status_code == 200 and "connected" in done.text

        clock.advance(seconds=6)
        token = await s.agent.poll_device(s.http, s.found, started["device_code"])
        assert token.status_code == 200, token.text
        body = token.json()
        assert "session_id" not in body and "signed_in" not in body and body["refresh_token"].startswith("fdat_")
        _, claims = await s.claims(body["access_token"])
        assert claims["sub"] == "ada" and claims["client_id"] == s.agent.client_id and claims["scope"] == SCOPE
        row = await s.sign_in_row(runtime, claims["sgn"])
        assert (row["type"], row["profile"], row["account_id"]) == ("device", "1.0", "ada")
        assert row["idp_session"] == idp_session_hash(idp.issuer, s.idp_sid())
        # The device code was used once.
        again = await s.agent.poll_device(s.http, s.found, started["device_code"])
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text


async def test_the_1_0_account_is_the_verified_email_when_so_configured(
        settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb,
        idp: OpenIdProvider) -> None:
    async with (staged10(settings, console, clock, runtime, web, idp, account_claim="email") as s,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser):
        pending, returned = await direct_to_agent(s, browser, login="grace")
        r = await s.agent.redeem(s.http, s.found, pending, returned)
        assert r.status_code == 200, r.text
        _, claims = await s.claims(r.json()["access_token"])
        assert claims["sub"] == "grace@corp.example"  # the IdP's email, email_verified true
        assert (await s.sign_in_row(runtime, claims["sgn"]))["account_id"] == "grace@corp.example"


async def test_a_cancelled_login_reaches_the_1_0_agent_as_access_denied(
        settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb,
        idp: OpenIdProvider) -> None:
    async with staged10(settings, console, clock, runtime, web, idp) as s:
        pending = s.agent.authorize(s.found, SCOPE)
        s.stage.issuer.cookies.clear()
        r = await s.stage.issuer.get(pending.url[len(BASE):], follow_redirects=False)
        back_url = await login_at_idp(r.headers["location"], login="ada", stop_at=s.stage.callback_url, cancel=True)
        r = await s.stage.back(back_url)
        assert r.status_code == 303, r.text
        returned = r.headers["location"]
        back = {k: v[0] for k, v in parse_qs(urlsplit(returned).query).items()}
        assert back["error"] == "access_denied" and back["state"] == pending.state and back["iss"] == s.found.issuer
        with pytest.raises(SignInError) as refused:  # state and iss are the agent's: the IdP's refusal, passed on
            await s.agent.redeem(s.http, s.found, pending, returned)
        assert refused.value.code == "access_denied"
