"""The exact Content-Security-Policy of each sign-in page, on the wire.

Browsers apply ``form-action`` to the redirects that follow a form's POST, against the
policy of the page that sent the form. So each page names, beside ``'self'``, the one
origin its form's answer may redirect to, and nothing else: the device page the
company's login page (Continue starts the login handoff), a Direct Sign-In's consent page
the agent's registered ``redirect_uri`` (PAP-4.5-01: Allow and Deny redirect there), a
Device flow's consent page nothing (its answer is a page of ours). Framing stays denied
and the forms keep their CSRF check. (The journeys in a real browser are in
``tests/browser/test_issuer_sign_in_journeys.py``.)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import configure, make_company
from tests.integration.signin.test_device_pages import company_login, csrf
from tests.integration.signin.test_device_pages import setup as device_setup
from tests.integration.signin.test_direct_sign_in import authorize, params, to_consent
from tests.integration.signin.test_direct_sign_in import setup as direct_setup
from tests.support.agent import TestAgent

LOGIN_ORIGIN = "https://login.shop.example"  # of test_device_pages.LOGIN


def policy(form_action: str) -> str:
    return ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            f"form-action {form_action}; base-uri 'none'; frame-ancestors 'none'")


def assert_page_headers(r: Any, form_action: str) -> None:
    assert r.headers.get_list("content-security-policy") == [policy(form_action)], r.headers
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["referrer-policy"] == "no-referrer"


async def test_the_device_page_allows_its_form_to_end_at_the_company_login_page(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
        clock: Any, store: Any) -> None:
    company, key = await device_setup(console, issuer, tenant, clock, store)
    started = (await company.device(agent, "poppy:read")).json()
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device", params={"user_code": started["user_code"]})
    assert page.status_code == 200
    assert_page_headers(page, f"'self' {LOGIN_ORIGIN}")
    # A wrong code answers the form again: the same policy, so its Continue works too.
    wrong = await issuer.post(f"/{tenant.slug}/device", data={"user_code": "BBBB-BBBB",
                                                               "_csrf_token": csrf(page.text)})
    assert wrong.status_code == 400 and "not valid" in wrong.text
    assert_page_headers(wrong, f"'self' {LOGIN_ORIGIN}")
    # CSRF is still required.
    assert (await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"]})).status_code == 403

    handoff = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"],
                                                                 "_csrf_token": csrf(page.text)},
                                follow_redirects=False)
    assert handoff.status_code == 303
    assert urlsplit(handoff.headers["location"])[:2] == urlsplit(LOGIN_ORIGIN)[:2]
    response = await company_login(issuer, tenant, handoff.headers["location"], key, "acct_ada")
    back = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == f"{tenant.issuer}/consent"
    # A Device flow's consent is answered by a page of ours: its form may post only to the issuer.
    consent = await issuer.get(f"/{tenant.slug}/consent")
    assert consent.status_code == 200
    assert_page_headers(consent, "'self'")
    done = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                               "scope": ["poppy:read"], "decision": "allow"})
    assert done.status_code == 200 and "connected" in done.text
    assert_page_headers(done, "'self'")


async def test_a_login_page_on_another_port_is_named_with_its_port(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any,
        store: Any) -> None:
    await device_setup(console, issuer, tenant, clock, store)
    current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]["login"]
    await configure(console, tenant, login={**current, "url": "https://Login.Shop.Example:8443/signin"})
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device")
    assert_page_headers(page, "'self' https://login.shop.example:8443")


async def test_without_a_login_connection_the_device_page_allows_only_itself(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any,
        store: Any) -> None:
    await make_company(console, issuer, tenant, clock, store)  # Device Sign-In on, no login
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device")
    assert page.status_code == 200
    assert_page_headers(page, "'self'")


async def test_a_direct_consent_page_allows_its_form_to_end_at_the_registered_redirect_uri_only(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
        clock: Any, store: Any) -> None:
    _, key = await direct_setup(console, issuer, tenant, clock, store)
    for decision in ("allow", "deny"):
        query, started = params(agent)
        consent = await to_consent(issuer, tenant, key, query)
        assert_page_headers(consent, f"'self' https://{agent.host}")
        decided = await issuer.post(f"/{tenant.slug}/consent", data={
            "_csrf_token": csrf(consent.text), "decision": decision, "scope": ["poppy:read"]},
            follow_redirects=False)
        assert decided.status_code == 303, decided.text
        assert decided.headers["location"].startswith(started.redirect_uri + "?")


async def test_a_direct_consent_post_without_csrf_is_refused(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
        clock: Any, store: Any) -> None:
    _, key = await direct_setup(console, issuer, tenant, clock, store)
    query, _ = params(agent)
    await to_consent(issuer, tenant, key, query)
    forged = await issuer.post(f"/{tenant.slug}/consent", data={"decision": "allow", "scope": ["poppy:read"]},
                               follow_redirects=False)
    assert forged.status_code == 403


async def test_refusals_shown_on_a_page_keep_the_default_policy(
        console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
        clock: Any, store: Any) -> None:
    await direct_setup(console, issuer, tenant, clock, store)
    query, _ = params(agent, redirect_uri="https://elsewhere.example/callback")  # not registered
    shown = await authorize(issuer, tenant, query)
    assert shown.status_code == 400 and "not valid" in shown.text
    assert_page_headers(shown, "'self'")
    issuer.cookies.clear()
    nothing = await issuer.get(f"/{tenant.slug}/consent")  # no flow
    assert nothing.status_code == 400
    assert_page_headers(nothing, "'self'")
