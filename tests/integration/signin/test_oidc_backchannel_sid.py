"""Back-Channel Logout 1.0 by IdP session (``sid``): what one IdP session signed in, and only that.

The IdP is a real ``oidc-provider`` whose client ``fd-bcl`` is registered with a
back-channel logout URI and ``backchannel_logout_session_required``, so its ID tokens carry
``sid`` and, when the user signs out at the IdP (``/session/end``), it sends a logout token
(``typ`` ``logout+jwt``, ``sub`` and ``sid``) to that URI. The issuer runs in process where
the IdP's server cannot reach it, so the URI is a `FrontdoorStandIn` and the test delivers the
IdP's own token as it came. A ``sid``-only token (which this IdP never sends) is signed here
with the IdP's key, as in ``test_oidc_backchannel_logout``.

A token with ``sub`` and ``sid`` also ends that account's sign-ins that kept no IdP session
and may be OIDC ones (``login_via`` ``oidc``, or unknown: made before it was kept), never its
sign-ins of another IdP session nor ones through the signed handoff. A sign-in through the
handoff is made here by approving the device code as the handoff's consent page does
(``login_via="handoff"``), since this tenant's login is the IdP; that the handoff pages
record ``handoff`` is checked on its own, in a handoff tenant.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from frontdoor_sessions.oidc_id_token import idp_session_hash
from frontdoor_sessions.revocation import revoke_sign_ins
from joserfc import jws, jwt
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import new_agent
from tests.integration.signin.test_device_pages import company_login, csrf
from tests.integration.signin.test_device_pages import setup as handoff_setup
from tests.integration.signin.test_direct_sign_in import callback, params
from tests.integration.signin.test_oidc_sign_in import BASE, SECRET, SLUGS, Stage, staged
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import FrontdoorStandIn, OpenIdProvider, login_at_idp, logout_at_idp, new_key

EVENT = "http://schemas.openid.net/event/backchannel-logout"


@pytest.fixture(scope="module")
def catcher() -> Iterator[FrontdoorStandIn]:
    caught = FrontdoorStandIn()
    try:
        yield caught
    finally:
        caught.stop()


@pytest.fixture(scope="module")
def idp(catcher: FrontdoorStandIn) -> Iterator[OpenIdProvider]:
    client = {"client_id": "fd-bcl", "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic",
              "redirect_uris": [f"{BASE}/{s}/oidc/callback" for s in SLUGS], "grant_types": ["authorization_code"],
              "response_types": ["code"], "backchannel_logout_uri": catcher.logout_url,
              "backchannel_logout_session_required": True}
    # A client with no logout URI: this IdP's ID tokens for it carry no sid.
    no_sid = {**{k: v for k, v in client.items() if not k.startswith("backchannel")}, "client_id": "fd-nosid"}
    provider = OpenIdProvider([client, no_sid], new_key("idp-bcl-1"))
    try:
        yield provider
    finally:
        provider.stop()


def claims_of(token: str, stage: Stage) -> dict[str, Any]:
    return dict(jwt.decode(token, stage.idp.key).claims)


async def device_via_idp(stage: Stage, browser: httpx.AsyncClient, agent: TestAgent,
                         login: str = "ada") -> dict[str, Any]:
    """A Device Sign-In of ``agent`` whose user signs in at the IdP in ``browser`` (its IdP session)."""
    c = stage.company
    session = await c.session(agent, "alice")
    started, location = await stage.device_to_idp(agent)
    back_url = await login_at_idp(location, login=login, stop_at=stage.callback_url, browser=browser)
    r = await stage.back(back_url)
    assert r.status_code == 303, r.text
    assert (await stage.consent(["poppy:read"])).status_code == 200
    token = await c.poll(agent, started["device_code"], session["session_id"])
    assert token.status_code == 200, token.text
    return dict(token.json())


async def direct_via_idp(stage: Stage, browser: httpx.AsyncClient, agent: TestAgent) -> dict[str, Any]:
    c = stage.company
    session = await c.session(agent, "alice")
    query, started = params(agent, scope="poppy:read")
    stage.issuer.cookies.clear()
    r = await stage.issuer.get(f"/{c.tenant.slug}/oauth/authorize", params=query, follow_redirects=False)
    assert r.status_code == 303, r.text
    back_url = await login_at_idp(r.headers["location"], login="ada", stop_at=stage.callback_url, browser=browser)
    assert (await stage.back(back_url)).status_code == 303
    decided = await stage.consent(["poppy:read"])
    answer = callback(decided.headers["location"], started)
    token = await c.post_token(agent, {"grant_type": "authorization_code", "code": answer["code"],
                                       "code_verifier": started.verifier, "redirect_uri": started.redirect_uri,
                                       "session_id": session["session_id"]})
    assert token.status_code == 200, token.text
    return dict(token.json())


async def post_logout(stage: Stage, token: str) -> Any:
    return await stage.issuer.post(f"/{stage.tenant.slug}/oidc/backchannel-logout", data={"logout_token": token})


async def recorded(runtime: Any, tenant_id: str, token: dict[str, Any], stage: Stage) -> Any:
    """The ``sign_ins`` row of the sign-in that issued ``token``: its id, idp_session and login_via."""
    seen = await stage.company.introspect(token["access_token"])
    async with runtime.pool.acquire() as conn:
        return await conn.fetchrow(
            "SELECT s.id, s.idp_session, s.login_via FROM sign_ins s JOIN pap_sessions p ON p.tenant_id = s.tenant_id"
            " AND p.sign_in_id = s.id WHERE s.tenant_id = $1 AND p.id = $2", tenant_id, seen["sid"])


async def idp_session_of(runtime: Any, tenant_id: str, token: dict[str, Any], stage: Stage) -> str | None:
    return (await recorded(runtime, tenant_id, token, stage))["idp_session"]  # type: ignore[no-any-return]


async def approved_as(stage: Stage, agent: TestAgent, account: str, *, login_via: str | None) -> dict[str, Any]:
    """A Device Sign-In approved as the consent page does after ``login_via`` vouched for ``account``
    (None: an approval that says nothing, as one made before ``login_via`` was kept)."""
    c = stage.company
    session = await c.session(agent, "alice")
    started = (await c.device(agent, "poppy:read")).json()
    found = await c.store.find_by_user_code(c.tenant.id, started["user_code"])
    assert found is not None
    assert await c.store.approve(c.tenant.id, found.handle, account, "poppy:read", login_via=login_via)
    token = await c.poll(agent, started["device_code"], session["session_id"])
    assert token.status_code == 200, token.text
    return dict(token.json())


async def signed_in(stage: Stage, token: dict[str, Any]) -> bool:
    return bool((await stage.company.introspect(token["access_token"]))["signed_in"])


async def test_the_idps_logout_ends_what_that_idp_session_signed_in(
        settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb,
        idp: OpenIdProvider, catcher: FrontdoorStandIn) -> None:
    async with (staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as stage,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as laptop,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as phone):
        c = stage.company
        # Two agents signed in from Ada's laptop session at the IdP (one Device, one Direct) ...
        agent_a, agent_b = new_agent(web), new_agent(web)
        on_laptop = await device_via_idp(stage, laptop, agent_a)
        laptop_sid = claims_of(stage.internet.id_tokens[-1], stage)["sid"]
        also_on_laptop = await direct_via_idp(stage, laptop, agent_b)
        assert claims_of(stage.internet.id_tokens[-1], stage)["sid"] == laptop_sid  # the same IdP session
        # ... one from her phone (another IdP session), and one through the signed handoff.
        on_phone = await device_via_idp(stage, phone, new_agent(web))
        phone_sid = claims_of(stage.internet.id_tokens[-1], stage)["sid"]
        assert phone_sid != laptop_sid
        no_idp = await approved_as(stage, new_agent(web), "ada", login_via="handoff")

        # What is kept is the hash of the issuer and the sid, never the sid.
        expected = idp_session_hash(idp.issuer, laptop_sid)
        assert await idp_session_of(runtime, stage.tenant.id, on_laptop, stage) == expected
        assert await idp_session_of(runtime, stage.tenant.id, also_on_laptop, stage) == expected
        assert await idp_session_of(runtime, stage.tenant.id, on_phone, stage) == idp_session_hash(idp.issuer,
                                                                                                  phone_sid)
        assert await idp_session_of(runtime, stage.tenant.id, no_idp, stage) is None
        # Which login vouched is kept too.
        for made, via in ((on_laptop, "oidc"), (also_on_laptop, "oidc"), (on_phone, "oidc"), (no_idp, "handoff")):
            assert (await recorded(runtime, stage.tenant.id, made, stage))["login_via"] == via
        async with runtime.pool.acquire() as conn:
            stored = await conn.fetchval("SELECT count(*) FROM sign_ins WHERE tenant_id = $1 AND idp_session = $2",
                                         stage.tenant.id, laptop_sid)
        assert stored == 0

        # Ada signs out at the IdP on her laptop: the IdP sends its logout token.
        catcher.tokens.clear()
        await logout_at_idp(laptop, idp)
        assert len(catcher.tokens) == 1
        token = catcher.tokens[0]
        header = jws.extract_compact(token.encode()).headers()
        sent = claims_of(token, stage)
        assert header["typ"] == "logout+jwt" and sent["sid"] == laptop_sid and sent["sub"] == "ada"
        assert EVENT in sent["events"] and "nonce" not in sent

        r = await post_logout(stage, token)
        assert r.status_code == 200, r.text
        # Both sign-ins of the laptop session are revoked, Sessions signed out, tokens dead ...
        assert not await signed_in(stage, on_laptop) and not await signed_in(stage, also_on_laptop)
        refresh = await c.refresh(agent_a, on_laptop["refresh_token"])
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
        refresh = await c.refresh(agent_b, also_on_laptop["refresh_token"])
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
        # ... and the same account's other sign-ins are not.
        assert await signed_in(stage, on_phone) and await signed_in(stage, no_idp)
        async with runtime.pool.acquire() as conn:
            audit = await conn.fetchrow(
                "SELECT actor_type, details FROM audit_log WHERE tenant_id = $1 AND action = 'account.disconnected'"
                " AND target_id = 'ada'", stage.tenant.id)
        assert audit is not None and audit["actor_type"] == "system"
        details = audit["details"] if isinstance(audit["details"], dict) else json.loads(audit["details"])
        assert details["via"] == "oidc_backchannel_logout" and details["idp_session"] is True
        assert details["sign_ins_revoked"] == 2 and details["without_idp_session"] == 0
        assert laptop_sid not in str(details)


def sid_token(stage: Stage, clock: ShiftableClock, *, sid: str | None, sub: str | None = None,
              aud: str = "fd-bcl") -> str:
    now = int(clock().timestamp())
    claims = {"iss": stage.idp.issuer, "aud": aud, "iat": now, "exp": now + 120, "jti": secrets.token_urlsafe(16),
              "events": {EVENT: {}}, **({"sid": sid} if sid is not None else {}), **({"sub": sub} if sub else {})}
    return jwt.encode({"alg": "RS256", "kid": stage.idp.key.kid, "typ": "logout+jwt"}, claims, stage.idp.key)


async def test_a_sid_only_logout_token(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock,
                                       runtime: Any, web: MockWeb, idp: OpenIdProvider) -> None:
    async with (staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as a,
                staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as b,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as other_browser):
        # One IdP session signs Ada in to two tenants (the same client, so the same sid).
        in_a = await device_via_idp(a, browser, new_agent(web))
        sid = claims_of(a.internet.id_tokens[-1], a)["sid"]
        in_b = await device_via_idp(b, browser, new_agent(web))
        assert claims_of(b.internet.id_tokens[-1], b)["sid"] == sid
        grace = await device_via_idp(a, other_browser, new_agent(web), login="grace")

        # An unknown sid: accepted (§2.8: 200), and nothing is revoked.
        r = await post_logout(a, sid_token(a, clock, sid="not-a-session-of-ours"))
        assert r.status_code == 200, r.text
        assert await signed_in(a, in_a) and await signed_in(b, in_b)
        # sub and sid naming another account: nothing of Ada's session is revoked either.
        assert (await post_logout(a, sid_token(a, clock, sid=sid, sub="grace"))).status_code == 200
        assert await signed_in(a, in_a) and await signed_in(a, grace)

        # The sid alone, no sub: Ada's sign-in of that session, in tenant A only.
        r = await post_logout(a, sid_token(a, clock, sid=sid))
        assert r.status_code == 200, r.text
        assert not await signed_in(a, in_a)
        assert await signed_in(b, in_b) and await signed_in(a, grace)
        # Neither sub nor sid, or an empty sid: refused as before.
        for token in (sid_token(a, clock, sid=None), sid_token(a, clock, sid="")):
            r = await post_logout(a, token)
            assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        assert await signed_in(a, grace)


async def audit_of(runtime: Any, tenant_id: str, account: str) -> list[dict[str, Any]]:
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'account.disconnected'"
                                " AND target_id = $2 ORDER BY at, id", tenant_id, account)
    return [r["details"] if isinstance(r["details"], dict) else json.loads(r["details"]) for r in rows]


async def test_sub_and_sid_also_end_the_accounts_sign_ins_that_kept_no_idp_session(
        settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb,
        idp: OpenIdProvider, catcher: FrontdoorStandIn) -> None:
    """A sign-in made before idp_session and login_via were kept is ended by the IdP's logout of its account."""
    async with (staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as stage,
                staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as other_tenant,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as laptop,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as phone):
        on_laptop = await device_via_idp(stage, laptop, new_agent(web))
        on_phone = await device_via_idp(stage, phone, new_agent(web))  # another IdP session: stays
        # Made before the migrations: no idp_session, no login_via (what every sign-in then was).
        legacy_agent = new_agent(web)
        legacy = await approved_as(stage, legacy_agent, "ada", login_via=None)
        row = await recorded(runtime, stage.tenant.id, legacy, stage)
        assert row["idp_session"] is None and row["login_via"] is None
        # An old mediated sign-in (no login_via either, but its type says it was not the IdP's).
        legacy_mediated = await approved_as(stage, new_agent(web), "ada", login_via=None)
        async with runtime.pool.acquire() as conn:
            await conn.execute("UPDATE sign_ins SET type = 'mediated' WHERE tenant_id = $1 AND id = $2",
                               stage.tenant.id, (await recorded(runtime, stage.tenant.id, legacy_mediated,
                                                                stage))["id"])
        via_handoff = await approved_as(stage, new_agent(web), "ada", login_via="handoff")
        graces = await approved_as(stage, new_agent(web), "grace", login_via=None)
        elsewhere = await approved_as(other_tenant, new_agent(web), "ada", login_via=None)

        catcher.tokens.clear()
        await logout_at_idp(laptop, idp)  # the IdP's own token: sub and sid
        assert len(catcher.tokens) == 1 and {"sub", "sid"} <= set(claims_of(catcher.tokens[0], stage))
        r = await post_logout(stage, catcher.tokens[0])
        assert r.status_code == 200, r.text

        assert not await signed_in(stage, on_laptop) and not await signed_in(stage, legacy)
        refresh = await stage.company.refresh(legacy_agent, legacy["refresh_token"])
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
        async with runtime.pool.acquire() as conn:
            revoked = await conn.fetchval("SELECT revoked_at IS NOT NULL FROM sign_ins WHERE tenant_id = $1"
                                          " AND id = $2", stage.tenant.id, row["id"])
        assert revoked is True
        for kept in (on_phone, legacy_mediated, via_handoff, graces):
            assert await signed_in(stage, kept)
        assert await signed_in(other_tenant, elsewhere)
        (details,) = await audit_of(runtime, stage.tenant.id, "ada")
        assert details["sign_ins_revoked"] == 2 and details["without_idp_session"] == 1
        assert await audit_of(runtime, other_tenant.tenant.id, "ada") == []


async def test_an_oidc_sign_in_whose_id_token_had_no_sid(settings: Settings, console: AsyncTestClient[Any],
                                                         clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                         idp: OpenIdProvider) -> None:
    async with (staged(settings, console, clock, runtime, web, idp, client_id="fd-nosid",
                       backchannel_logout=True) as stage,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as other_browser):
        ada = await device_via_idp(stage, browser, new_agent(web))
        assert "sid" not in claims_of(stage.internet.id_tokens[-1], stage)
        row = await recorded(runtime, stage.tenant.id, ada, stage)
        assert row["idp_session"] is None and row["login_via"] == "oidc"
        grace = await device_via_idp(stage, other_browser, new_agent(web), login="grace")
        handoff = await approved_as(stage, new_agent(web), "ada", login_via="handoff")

        # A sid alone cannot say whose sign-in that was: nothing is revoked.
        r = await post_logout(stage, sid_token(stage, clock, sid="idp-session-1", aud="fd-nosid"))
        assert r.status_code == 200, r.text
        assert await signed_in(stage, ada)
        # With Ada's sub: her OIDC sign-in (the IdP session may be the one it came from) ends.
        r = await post_logout(stage, sid_token(stage, clock, sid="idp-session-1", sub="ada", aud="fd-nosid"))
        assert r.status_code == 200, r.text
        assert not await signed_in(stage, ada)
        assert await signed_in(stage, grace) and await signed_in(stage, handoff)


async def test_the_handoff_pages_record_their_sign_ins_as_handoff(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
        clock: Any, store: Any, runtime: Any) -> None:
    company, key = await handoff_setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "alice")
    started = (await company.device(agent, "poppy:read")).json()
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device", params={"user_code": started["user_code"]})
    r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"],
                                                           "_csrf_token": csrf(page.text)}, follow_redirects=False)
    assert r.status_code == 303, r.text
    response = await company_login(issuer, tenant, r.headers["location"], key, "acct_ada")
    r = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert r.status_code == 303, r.text
    consent = await issuer.get(f"/{tenant.slug}/consent")
    done = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                               "scope": ["poppy:read"], "decision": "allow"})
    assert done.status_code == 200 and "connected" in done.text
    clock.advance(seconds=6)
    token = await company.poll(agent, started["device_code"], session["session_id"])
    assert token.status_code == 200, token.text
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT login_via, idp_session FROM sign_ins WHERE tenant_id = $1"
                                  " AND account_id = 'acct_ada'", tenant.id)
    assert row is not None and row["login_via"] == "handoff" and row["idp_session"] is None


async def test_a_failed_revocation_does_not_use_up_the_token(settings: Settings, console: AsyncTestClient[Any],
                                                             clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                             idp: OpenIdProvider,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The jti is claimed, the revoking transaction fails: the IdP's retry of the same token applies."""
    async with (staged(settings, console, clock, runtime, web, idp, client_id="fd-bcl",
                       backchannel_logout=True) as stage,
                httpx.AsyncClient(follow_redirects=False, timeout=10) as browser):
        ada = await device_via_idp(stage, browser, new_agent(web))
        sid = claims_of(stage.internet.id_tokens[-1], stage)["sid"]
        failures: list[int] = []

        async def fails_once(*args: Any, **kwargs: Any) -> Any:
            if not failures:
                failures.append(1)
                raise ConnectionResetError("the database went away")
            return await revoke_sign_ins(*args, **kwargs)

        monkeypatch.setattr("frontdoor_sessions.oidc_backchannel_logout.revoke_sign_ins", fails_once)
        token = sid_token(stage, clock, sid=sid, sub="ada")
        r = await post_logout(stage, token)
        assert r.status_code == 500 and failures == [1]
        assert await signed_in(stage, ada)  # nothing was revoked, nothing audited
        assert await audit_of(runtime, stage.tenant.id, "ada") == []
        # The IdP retries the same token: not a replay, and it applies.
        r = await post_logout(stage, token)
        assert r.status_code == 200, r.text
        assert not await signed_in(stage, ada)
        assert len(await audit_of(runtime, stage.tenant.id, "ada")) == 1
        # Once applied, it is a replay.
        again = await post_logout(stage, token)
        assert again.status_code == 400 and again.json()["error"] == "invalid_request"
