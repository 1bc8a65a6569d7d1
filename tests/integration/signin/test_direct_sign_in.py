"""Direct Sign-In (PAP §4.5) as the user and the agent live it: ``{issuer}/oauth/authorize``,
the company's login (the signed handoff), Frontdoor's consent page, the redirect back with
``code``, ``state`` and ``iss``, and the ``authorization_code`` grant with PKCE, DPoP and
the agent's Session. Then what each step refuses, and how."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, assert_refusal, configure, new_agent
from tests.integration.signin.test_device_pages import LOGIN, company_login, csrf
from tests.integration.signin.test_device_pages import setup as device_setup
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

DIRECT_SCOPES = ["poppy:read", "orders:read"]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@dataclass
class Started:
    """An authorization request the agent made: what it must remember."""

    state: str
    verifier: str
    redirect_uri: str


async def setup(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any,
                store: Any) -> tuple[Company, Any]:
    """The device pages' company (login connection, ``orders:read``) with Direct Sign-In on too."""
    company, key = await device_setup(console, issuer, tenant, clock, store)
    await configure(console, tenant, direct={"enabled": True, "scopes": DIRECT_SCOPES})
    return company, key


def params(agent: TestAgent, *, scope: str | None = "poppy:read orders:read", **over: str | None) -> tuple[
        dict[str, str], Started]:
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(16)
    query: dict[str, str | None] = {
        "response_type": "code", "client_id": agent.client_id, "redirect_uri": agent.metadata()["redirect_uris"][0],
        "scope": scope, "state": state, "code_challenge": challenge, "code_challenge_method": "S256",
    }
    query.update(over)
    clean = {k: v for k, v in query.items() if v is not None}
    return clean, Started(state=state, verifier=verifier, redirect_uri=agent.metadata()["redirect_uris"][0])


async def authorize(issuer: AsyncTestClient[Any], t: TenantHandle, query: dict[str, str]) -> Any:
    issuer.cookies.clear()  # a fresh browser
    return await issuer.get(f"/{t.slug}/oauth/authorize", params=query, follow_redirects=False)


def callback(location: str, started: Started) -> dict[str, str]:
    """The redirect to the agent, checked as the agent does: its redirect_uri, one of each value."""
    parts = urlsplit(location)
    expected = urlsplit(started.redirect_uri)
    assert (parts.scheme, parts.netloc, parts.path) == (expected.scheme, expected.netloc, expected.path), location
    values = parse_qs(parts.query)
    assert all(len(v) == 1 for v in values.values()), location
    return {k: v[0] for k, v in values.items()}


async def to_consent(issuer: AsyncTestClient[Any], t: TenantHandle, key: Any, query: dict[str, str],
                     account: str = "acct_ada") -> Any:
    """Authorize, sign in at the company, and land on the consent page."""
    r = await authorize(issuer, t, query)
    assert r.status_code == 303, r.text
    assert r.headers["location"].startswith(LOGIN + "?request=")
    response = await company_login(issuer, t, r.headers["location"], key, account)
    back = await issuer.post(f"/{t.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == f"{t.issuer}/consent"
    consent = await issuer.get(f"/{t.slug}/consent")
    assert consent.status_code == 200, consent.text
    return consent


async def browser_sign_in(issuer: AsyncTestClient[Any], t: TenantHandle, key: Any, agent: TestAgent, *,
                          account: str = "acct_ada", scope: str = "poppy:read orders:read",
                          granted: list[str] | None = None) -> tuple[dict[str, str], Started]:
    query, started = params(agent, scope=scope)
    consent = await to_consent(issuer, t, key, query, account)
    decided = await issuer.post(f"/{t.slug}/consent", data={"_csrf_token": csrf(consent.text), "decision": "allow",
                                                            "scope": granted or scope.split(" ")},
                                follow_redirects=False)
    assert decided.status_code == 303, decided.text
    assert decided.headers["cache-control"] == "no-store"
    return callback(decided.headers["location"], started), started


async def redeem(company: Company, agent: TestAgent, code: str, started: Started, session_id: str, *,
                 verifier: str | None = None, redirect_uri: str | None = None) -> Any:
    return await company.post_token(agent, {"grant_type": "authorization_code", "code": code,
                                            "code_verifier": verifier or started.verifier,
                                            "redirect_uri": redirect_uri or started.redirect_uri,
                                            "session_id": session_id})


async def test_direct_sign_in_through_the_pages(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                               tenant: TenantHandle, agent: TestAgent, clock: Any,
                                               store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    slug = tenant.slug
    metadata = (await issuer.get(f"/.well-known/oauth-authorization-server/{slug}")).json()
    assert metadata["authorization_endpoint"] == f"{tenant.issuer}/oauth/authorize"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert "authorization_code" in metadata["grant_types_supported"]
    session = await company.session(agent, "alice")

    query, started = params(agent)
    consent = await to_consent(issuer, tenant, key, query)
    assert "frame-ancestors 'none'" in consent.headers["content-security-policy"]
    assert consent.headers["cache-control"] == "no-store"
    assert agent.name in consent.text and agent.host in consent.text and "See your orders" in consent.text
    assert "acct_ada" in consent.text
    # The user grants a subset.
    decided = await issuer.post(f"/{slug}/consent", data={"_csrf_token": csrf(consent.text), "decision": "allow",
                                                          "scope": ["orders:read"]}, follow_redirects=False)
    assert decided.status_code == 303
    back = callback(decided.headers["location"], started)
    assert set(back) == {"code", "state", "iss"}
    assert back["state"] == started.state and back["iss"] == tenant.issuer
    assert len(base64.urlsafe_b64decode(back["code"] + "=")) == 32  # 256 bits
    assert "fd_flow=\"\"" in decided.headers.get("set-cookie", "") or "Max-Age=0" in decided.headers.get(
        "set-cookie", "")

    token = await redeem(company, agent, back["code"], started, session["session_id"])
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["token_type"] == "DPoP" and body["signed_in"] is True and body["scope"] == "orders:read"
    assert body["session_id"] == session["session_id"] and body["refresh_token"].startswith("fdat_")
    assert token.headers["cache-control"] == "no-store"
    state = await company.introspect(body["access_token"])
    assert state["account"] == "acct_ada" and state["scope"] == "orders:read" and state["sub"] == "alice"
    # The Account Token works like any other: it refreshes within what was granted.
    refreshed = await company.refresh(agent, body["refresh_token"], session_id=session["session_id"])
    assert refreshed.status_code == 200 and refreshed.json()["scope"] == "orders:read"


async def test_the_agents_own_client_validates_the_redirect(console: AsyncTestClient[Any],
                                                            issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                            agent: TestAgent, clock: Any, store: Any) -> None:
    """The peer library's own request and callback checks accept what Frontdoor sends."""
    from personal_agent_protocol.auth import build_direct_sign_in_request, validate_direct_sign_in_callback

    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "ann")
    request = build_direct_sign_in_request(
        authorization_endpoint=f"{tenant.issuer}/oauth/authorize", issuer=tenant.issuer, client_id=agent.client_id,
        redirect_uri=agent.metadata()["redirect_uris"][0], scopes=["orders:read"])
    query = parse_qs(urlsplit(request.authorization_url.get_secret_value()).query)
    consent = await to_consent(issuer, tenant, key, {k: v[0] for k, v in query.items()})
    decided = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                                  "decision": "allow", "scope": "orders:read"},
                                follow_redirects=False)
    checked = validate_direct_sign_in_callback(request, decided.headers["location"])
    started = Started(state="", verifier=request.code_verifier.get_secret_value(), redirect_uri=request.redirect_uri)
    token = await redeem(company, agent, checked.code.get_secret_value(), started, session["session_id"])
    assert token.status_code == 200 and token.json()["scope"] == "orders:read", token.text


async def test_pkce_must_match_and_a_failed_exchange_uses_the_code(console: AsyncTestClient[Any],
                                                                   issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                                   agent: TestAgent, clock: Any, store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "bob")
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_bob")
    wrong, _ = pkce()
    r = await redeem(company, agent, back["code"], started, session["session_id"], verifier=wrong)
    assert_refusal(r, 400, "invalid_grant")
    # The code was presented once: even the right verifier cannot use it now.
    r = await redeem(company, agent, back["code"], started, session["session_id"])
    assert_refusal(r, 400, "invalid_grant")
    # PKCE "plain" (verifier == challenge) is refused at the authorization endpoint.
    query, st = params(agent, code_challenge_method="plain")
    r = await authorize(issuer, tenant, query)
    assert r.status_code == 303
    assert callback(r.headers["location"], st)["error"] == "invalid_request"


async def test_a_reused_code_is_refused_and_revokes_what_it_issued(console: AsyncTestClient[Any],
                                                                  issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                                  agent: TestAgent, clock: Any, store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "carol")
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_carol")
    first = await redeem(company, agent, back["code"], started, session["session_id"])
    assert first.status_code == 200, first.text
    issued = first.json()
    assert (await company.introspect(issued["access_token"]))["signed_in"] is True

    again = await redeem(company, agent, back["code"], started, session["session_id"])
    assert_refusal(again, 400, "invalid_grant")
    # What the first redemption issued is revoked: the Account Token, and the Session signed out.
    assert_refusal(await company.refresh(agent, issued["refresh_token"]), 400, "invalid_grant")
    state = await company.introspect(issued["access_token"])
    assert state["signed_in"] is False and state.get("account") is None
    renewed = await company.session(agent, "carol", session_id=session["session_id"])
    assert renewed["signed_in"] is False


async def test_bad_client_or_redirect_is_shown_never_redirected(console: AsyncTestClient[Any],
                                                                issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                                agent: TestAgent, clock: Any, store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    cases: list[dict[str, str | None]] = [
        {"redirect_uri": "https://evil.example/callback"},
        {"redirect_uri": f"https://{agent.host}/callback/other"},  # same host, not registered
        {"redirect_uri": f"https://{agent.host}/callback?x=1"},
        {"redirect_uri": None},
        {"client_id": "https://nobody-here.example/agent.json"},  # unknown: its document does not resolve
        {"client_id": "not a url"},
        {"client_id": None},
    ]
    for over in cases:
        query, _ = params(agent, **over)
        r = await authorize(issuer, tenant, query)
        assert r.status_code == 400, (over, r.status_code)
        assert "location" not in r.headers, over
        assert "not valid" in r.text
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert "evil.example" not in r.text
    # A repeated redirect_uri is no redirect_uri.
    query, _ = params(agent)
    r = await issuer.get(f"/{tenant.slug}/oauth/authorize?" + "&".join(f"{k}={v}" for k, v in query.items())
                         + "&redirect_uri=https%3A%2F%2Fevil.example%2Fcallback", follow_redirects=False)
    assert r.status_code == 400 and "location" not in r.headers
    # At the token endpoint, another redirect_uri than the request's is invalid_grant.
    session = await company.session(agent, "dave")
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_dave")
    r = await redeem(company, agent, back["code"], started, session["session_id"],
                     redirect_uri=f"https://{agent.host}/callback/other")
    assert_refusal(r, 400, "invalid_grant")


async def test_other_errors_redirect_with_state_and_iss(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                        tenant: TenantHandle, agent: TestAgent, clock: Any,
                                                        store: Any) -> None:
    await setup(console, issuer, tenant, clock, store)
    cases: list[tuple[dict[str, str | None], str]] = [
        ({"scope": None}, "invalid_request"),
        ({"scope": "poppy:read poppy:write"}, "invalid_scope"),  # poppy:write is not offered for Direct
        ({"scope": "nothing:known"}, "invalid_scope"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"response_type": None}, "invalid_request"),
        ({"code_challenge": None}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
    ]
    for over, error in cases:
        query, started = params(agent, **over)
        r = await authorize(issuer, tenant, query)
        assert r.status_code == 303, (over, r.text)
        back = callback(r.headers["location"], started)
        assert back["error"] == error, (over, back)
        assert back["state"] == started.state and back["iss"] == tenant.issuer
        assert "code" not in back
        assert "fd_flow" not in r.headers.get("set-cookie", "")
    # Without state there is none to echo; iss is still there.
    query, started = params(agent, state=None)
    r = await authorize(issuer, tenant, query)
    back = callback(r.headers["location"], started)
    assert back["error"] == "invalid_request" and "state" not in back and back["iss"] == tenant.issuer


async def test_direct_off_is_unauthorized_client(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                 tenant: TenantHandle, agent: TestAgent, clock: Any,
                                                 store: Any) -> None:
    """Direct Sign-In turned off: the request goes back refused (the tenant was never cached with it on)."""
    await device_setup(console, issuer, tenant, clock, store)
    query, started = params(agent)
    r = await authorize(issuer, tenant, query)
    back = callback(r.headers["location"], started)
    assert back["error"] == "unauthorized_client" and back["state"] == started.state


async def test_deny_redirects_access_denied(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                           tenant: TenantHandle, agent: TestAgent, clock: Any, store: Any) -> None:
    _, key = await setup(console, issuer, tenant, clock, store)
    for data in ({"decision": "deny"}, {"decision": "allow"}):  # allowing nothing is denying
        query, started = params(agent)
        consent = await to_consent(issuer, tenant, key, query, "acct_erin")
        r = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text), **data},
                              follow_redirects=False)
        assert r.status_code == 303
        back = callback(r.headers["location"], started)
        assert back["error"] == "access_denied" and back["state"] == started.state and back["iss"] == tenant.issuer
        assert "code" not in back
        # The flow is over: the consent cannot be replayed.
        again = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                                    "decision": "allow", "scope": "poppy:read"},
                                  follow_redirects=False)
        assert again.status_code == 400 and "location" not in again.headers


async def test_consent_resists_csrf_and_framing(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                tenant: TenantHandle, agent: TestAgent, clock: Any, store: Any) -> None:
    _, key = await setup(console, issuer, tenant, clock, store)
    query, _ = params(agent)
    consent = await to_consent(issuer, tenant, key, query, "acct_frank")
    assert "frame-ancestors 'none'" in consent.headers["content-security-policy"]
    assert consent.headers.get("x-frame-options", "DENY").upper() == "DENY"
    for data in ({"decision": "allow", "scope": "poppy:read"},
                 {"decision": "allow", "scope": "poppy:read", "_csrf_token": "forged"}):
        r = await issuer.post(f"/{tenant.slug}/consent", data=data, follow_redirects=False)
        assert r.status_code == 403, r.text
        assert "location" not in r.headers
    # The flow survived the forgeries; the real form still works.
    r = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text), "decision": "allow",
                                                           "scope": "poppy:read"}, follow_redirects=False)
    assert r.status_code == 303 and "code=" in r.headers["location"]


async def test_a_code_expires(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                              agent: TestAgent, clock: Any, store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "gina")
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_gina")
    clock.advance(seconds=61)
    r = await redeem(company, agent, back["code"], started, session["session_id"])
    assert_refusal(r, 400, "invalid_grant")


async def test_the_code_and_session_belong_to_the_same_agent(console: AsyncTestClient[Any],
                                                             issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                             agent: TestAgent, clock: Any, store: Any,
                                                             web: MockWeb) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    other = new_agent(web)
    mine = await company.session(agent, "hal")
    theirs = await company.session(other, "hal")

    # Another agent's Session: invalid_session (PAP §4.5: the Session must be of the same client).
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_hal")
    r = await redeem(company, agent, back["code"], started, theirs["session_id"])
    assert_refusal(r, 400, "invalid_session")
    assert (await company.introspect(theirs["access_token"]))["signed_in"] is False

    # Another agent presenting this agent's code: invalid_grant, and the code is not burnt.
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_hal")
    r = await redeem(company, other, back["code"], started, theirs["session_id"])
    assert_refusal(r, 400, "invalid_grant")
    ok = await redeem(company, agent, back["code"], started, mine["session_id"])
    assert ok.status_code == 200 and ok.json()["signed_in"] is True, ok.text

    # Missing parameters are invalid_request; no DPoP proof is invalid_dpop_proof.
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_hal")
    r = await company.post_token(agent, {"grant_type": "authorization_code", "code": back["code"],
                                         "redirect_uri": started.redirect_uri, "session_id": mine["session_id"]})
    assert_refusal(r, 400, "invalid_request")
    r = await company.post_token(agent, {"grant_type": "authorization_code", "code": back["code"],
                                         "code_verifier": started.verifier, "redirect_uri": started.redirect_uri,
                                         "session_id": mine["session_id"]}, dpop=False)
    assert_refusal(r, 400, "invalid_dpop_proof")
    # Neither refusal touched the code.
    ok = await redeem(company, agent, back["code"], started, mine["session_id"])
    assert ok.status_code == 200, ok.text


async def test_concurrent_redemptions_leave_nothing_issued(console: AsyncTestClient[Any],
                                                           issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                           agent: TestAgent, clock: Any, store: Any) -> None:
    """Two redemptions at once: one code, so whatever either issued ends revoked."""
    import asyncio

    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "ivy")
    back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_ivy")
    answers = await asyncio.gather(*(redeem(company, agent, back["code"], started, session["session_id"])
                                     for _ in range(2)))
    assert sorted(a.status_code for a in answers)[-1] == 400
    for a in answers:
        if a.status_code == 200:
            assert_refusal(await company.refresh(agent, a.json()["refresh_token"]), 400, "invalid_grant")
            assert (await company.introspect(a.json()["access_token"]))["signed_in"] is False
        else:
            assert_refusal(a, 400, "invalid_grant")


async def test_no_code_verifier_or_token_in_logs_or_spans(console: AsyncTestClient[Any],
                                                          issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                          agent: TestAgent, clock: Any, store: Any) -> None:
    from tests.integration.console.test_log_redaction import capture_logs, capture_spans

    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "jo")
    with capture_spans() as spans, capture_logs() as buf:
        back, started = await browser_sign_in(issuer, tenant, key, agent, account="acct_jo")
        token = (await redeem(company, agent, back["code"], started, session["session_id"])).json()
        await redeem(company, agent, back["code"], started, session["session_id"])  # a reuse, refused
    text = buf.getvalue() + spans.text()
    for name, value in {"code": back["code"], "code_verifier": started.verifier,
                        "account_token": token["refresh_token"], "session_token": token["access_token"]}.items():
        assert value not in text, f"{name} in logs or spans"
