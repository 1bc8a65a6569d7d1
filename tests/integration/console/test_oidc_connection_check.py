"""The dashboard's "Test connection" of an ``oidc`` login connection against a real OpenID
Provider (npm ``oidc-provider``): after discovery and the JWKS, the client credentials are
tried at the IdP's token endpoint with a never issued code. ``invalid_grant`` means the
credentials were accepted, ``invalid_client`` that they were rejected (RFC 6749 §5.2); a
wrong issuer and an IdP that is down are said as such. Never a secret on the page.

Then "Sign in to test": the real round trip. The console starts the code flow (PKCE,
``state``, ``nonce``) marked as a test and bound to the admin's console session, the admin
logs in at the IdP, the IdP answers at the issuer's ``/oidc/callback`` (the one redirect
URI the company registers), which hands the answer on to the console's result page: the
account claim, or the IdP's error. Nobody is signed in at Frontdoor; audited
``oidc_connection.tested``."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.integration.console.test_oidc_connection import put_login
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import IdpInternet, OpenIdProvider, login_at_idp, new_key

POLICY = OutboundPolicy(allow_http_loopback=True)
SECRET = "idp-secret-" + secrets.token_urlsafe(24)
WRONG = "not-the-secret-" + secrets.token_urlsafe(24)
BASE = "https://issuer.frontdoor.test"
SLUGS = [f"oidct{secrets.token_hex(3)}-{i}" for i in range(20)]
_slugs = itertools.count()


@pytest.fixture(scope="module")
def idp() -> Iterator[OpenIdProvider]:
    common = {"client_secret": SECRET, "redirect_uris": [f"{BASE}/{s}/oidc/callback" for s in SLUGS],
              "grant_types": ["authorization_code"], "response_types": ["code"]}
    provider = OpenIdProvider([
        {"client_id": "fd-basic", "token_endpoint_auth_method": "client_secret_basic", **common},
        {"client_id": "fd-post", "token_endpoint_auth_method": "client_secret_post", **common}], new_key("idp-1"))
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
async def internet(web: MockWeb, idp: OpenIdProvider) -> IdpInternet:
    internet = IdpInternet(web, POLICY)
    internet.add(idp)
    return internet


@pytest.fixture
async def dashboard(settings: Settings, migrated: str, clock: ShiftableClock,
                    internet: IdpInternet) -> AsyncIterator[AsyncTestClient[Any]]:
    """A console whose outbound client reaches the IdP on loopback (development policy)."""
    from frontdoor_console.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(POLICY, transport=internet))
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


async def _test(dashboard: AsyncTestClient[Any], tenant: TenantHandle, login: dict[str, Any]) -> Any:
    r = await put_login(dashboard, tenant, {"type": "oidc", **login})
    assert r.status_code == 200, r.text
    csrf = await sign_in(dashboard, tenant.email)
    return await dashboard.post("/settings/login/test", data={"_csrf_token": csrf}, follow_redirects=True)


@pytest.mark.parametrize("client_id", ["fd-basic", "fd-post"])
async def test_right_secret_is_accepted(dashboard: AsyncTestClient[Any], idp: OpenIdProvider, internet: IdpInternet,
                                        client_id: str) -> None:
    tenant = await sign_up(dashboard)
    method = "client_secret_basic" if client_id == "fd-basic" else "client_secret_post"
    r = await _test(dashboard, tenant, {"issuer": idp.issuer, "client_id": client_id, "client_secret": SECRET,
                                        "token_endpoint_auth_method": method})
    assert r.status_code == 200 and "accepted the client credentials" in r.text, r.text
    assert SECRET not in r.text
    # One request reached the token endpoint, authenticated as configured, with a code nobody issued.
    [request] = internet.token_requests
    body = request.content.decode()
    assert "grant_type=authorization_code" in body and "code=" in body
    if method == "client_secret_basic":
        assert request.headers["authorization"].startswith("Basic ") and "client_secret" not in body
    else:
        assert "client_secret=" in body and "authorization" not in request.headers


@pytest.mark.parametrize("client_id", ["fd-basic", "fd-post"])
async def test_wrong_secret_is_rejected(dashboard: AsyncTestClient[Any], idp: OpenIdProvider,
                                        client_id: str) -> None:
    tenant = await sign_up(dashboard)
    method = "client_secret_basic" if client_id == "fd-basic" else "client_secret_post"
    r = await _test(dashboard, tenant, {"issuer": idp.issuer, "client_id": client_id, "client_secret": WRONG,
                                        "token_endpoint_auth_method": method})
    assert r.status_code == 422, r.text
    assert "client ID or secret rejected by the IdP" in r.text and "Connection works" not in r.text
    assert WRONG not in r.text and SECRET not in r.text


async def test_unknown_client_id_is_rejected(dashboard: AsyncTestClient[Any], idp: OpenIdProvider) -> None:
    tenant = await sign_up(dashboard)
    r = await _test(dashboard, tenant, {"issuer": idp.issuer, "client_id": "nobody", "client_secret": SECRET})
    assert r.status_code == 422 and "client ID or secret rejected by the IdP" in r.text, r.text


async def test_wrong_issuer_is_a_discovery_error(dashboard: AsyncTestClient[Any], idp: OpenIdProvider,
                                                 internet: IdpInternet) -> None:
    tenant = await sign_up(dashboard)
    r = await _test(dashboard, tenant, {"issuer": f"{idp.issuer}/not-it", "client_id": "fd-basic",
                                        "client_secret": SECRET})
    assert r.status_code == 422 and "discovery failed" in r.text, r.text
    assert "/not-it/.well-known/openid-configuration" in r.text
    assert internet.token_requests == []  # nothing sent with the secret to what is not the IdP


async def test_idp_down(dashboard: AsyncTestClient[Any], internet: IdpInternet) -> None:
    tenant = await sign_up(dashboard)
    r = await _test(dashboard, tenant, {"issuer": "http://127.0.0.1:9", "client_id": "fd-basic",
                                        "client_secret": SECRET})
    assert r.status_code == 422 and "discovery failed" in r.text and "did not answer" in r.text, r.text


@pytest.fixture
async def issuer(settings: Settings, migrated: str, clock: ShiftableClock,
                 internet: IdpInternet) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_issuer.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(POLICY, transport=internet))
    async with AsyncTestClient(app, base_url=BASE) as client:
        yield client


async def _start(dashboard: AsyncTestClient[Any], idp: OpenIdProvider, secret: str = SECRET,
                 **login: Any) -> tuple[TenantHandle, str, str]:
    """A tenant on the IdP, its admin signed in to the dashboard: (tenant, CSRF token, the IdP's login URL)."""
    tenant = await sign_up(dashboard, slug=SLUGS[next(_slugs)])
    r = await put_login(dashboard, tenant, {"type": "oidc", "issuer": idp.issuer, "client_id": "fd-basic",
                                            "client_secret": secret, **login})
    assert r.status_code == 200, r.text
    csrf = await sign_in(dashboard, tenant.email)
    page = await dashboard.get("/settings")
    assert 'action="/settings/login/test-sign-in" target="_blank"' in page.text  # a popup, without JavaScript
    started = await dashboard.post("/settings/login/test-sign-in", data={"_csrf_token": csrf},
                                   follow_redirects=False)
    assert started.status_code == 303, started.text
    location = started.headers["location"]
    assert location.startswith(idp.issuer)
    query = dict(item.split("=", 1) for item in location.split("?", 1)[1].split("&"))
    assert query["code_challenge_method"] == "S256" and query["state"] and query["nonce"]
    assert query["redirect_uri"] == f"{tenant.issuer}/oidc/callback".replace(":", "%3A").replace("/", "%2F")
    return tenant, csrf, location


async def _back(issuer: AsyncTestClient[Any], dashboard: AsyncTestClient[Any], answer: str) -> tuple[Any, str]:
    """The browser follows the IdP's redirect to the issuer, which hands it on to the console."""
    assert answer.startswith(BASE)
    handed = await issuer.get(answer[len(BASE):], follow_redirects=False)
    assert handed.status_code == 303, handed.text
    location = handed.headers["location"]
    path = location[location.index("/settings/login/test-result"):]
    return await dashboard.get(path), path


async def _tested(db: Any, tenant: TenantHandle) -> list[str]:
    rows = await db.fetch("SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'oidc_connection.tested'"
                          " ORDER BY at", tenant.id)
    return [r["details"]["result"] for r in rows]


async def test_round_trip_shows_the_account_and_signs_nobody_in(dashboard: AsyncTestClient[Any],
                                                                 issuer: AsyncTestClient[Any],
                                                                 idp: OpenIdProvider, db: Any) -> None:
    tenant, _, location = await _start(dashboard, idp)
    answer = await login_at_idp(location, login="ada", stop_at=f"{tenant.issuer}/oidc/callback")
    result, path = await _back(issuer, dashboard, answer)
    assert result.status_code == 200, result.text
    assert "sub = ada" in result.text and "nobody was signed in" in result.text
    assert SECRET not in result.text
    assert await _tested(db, tenant) == ["ok"]
    # No token was issued for the tenant.
    for table in ("account_tokens", "pap_sessions"):
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE tenant_id = $1", tenant.id) == 0
    # The state is single-use: the same answer again is refused (and the issuer no longer hands it on).
    again = await dashboard.get(path)
    assert again.status_code == 422 and "used already" in again.text
    assert (await issuer.get(answer[len(BASE):], follow_redirects=False)).status_code == 400


async def test_round_trip_with_a_wrong_secret(dashboard: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                              idp: OpenIdProvider, db: Any) -> None:
    tenant, _, location = await _start(dashboard, idp, secret=WRONG)
    answer = await login_at_idp(location, login="ada", stop_at=f"{tenant.issuer}/oidc/callback")
    result, _ = await _back(issuer, dashboard, answer)
    assert result.status_code == 422 and "client ID or secret rejected by the IdP" in result.text
    assert WRONG not in result.text
    assert await _tested(db, tenant) == ["invalid_client"]


async def test_cancelled_at_the_idp_shows_its_error(dashboard: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                    idp: OpenIdProvider, db: Any) -> None:
    tenant, _, location = await _start(dashboard, idp)
    answer = await login_at_idp(location, login="ada", stop_at=f"{tenant.issuer}/oidc/callback", cancel=True)
    result, _ = await _back(issuer, dashboard, answer)
    assert result.status_code == 422 and "error=access_denied" in result.text
    assert await _tested(db, tenant) == ["idp_error:access_denied"]


async def test_bound_to_the_console_session_that_started_it(dashboard: AsyncTestClient[Any],
                                                            issuer: AsyncTestClient[Any], idp: OpenIdProvider,
                                                            db: Any) -> None:
    tenant, _, location = await _start(dashboard, idp)
    answer = await login_at_idp(location, login="ada", stop_at=f"{tenant.issuer}/oidc/callback")
    other = await add_admin(db, tenant, "admin")
    await sign_in(dashboard, other)  # another console session (another admin's browser)
    result, _ = await _back(issuer, dashboard, answer)
    assert result.status_code == 422 and "another console session" in result.text
    assert "sub = ada" not in result.text


async def test_only_admins_and_owners_start_it(dashboard: AsyncTestClient[Any], idp: OpenIdProvider,
                                               db: Any) -> None:
    tenant = await sign_up(dashboard, slug=SLUGS[next(_slugs)])
    assert (await put_login(dashboard, tenant, {"type": "oidc", "issuer": idp.issuer, "client_id": "fd-basic",
                                                "client_secret": SECRET})).status_code == 200
    viewer = await add_admin(db, tenant, "viewer")
    csrf = await sign_in(dashboard, viewer)
    r = await dashboard.post("/settings/login/test-sign-in", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 403
    assert (await dashboard.get("/settings/login/test-result?state=x&code=y")).status_code == 403


async def test_an_id_token_that_fails_a_check_is_named(dashboard: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                       idp: OpenIdProvider, internet: IdpInternet, db: Any) -> None:
    tenant, _, location = await _start(dashboard, idp)
    answer = await login_at_idp(location, login="ada", stop_at=f"{tenant.issuer}/oidc/callback")
    internet.tamper = lambda claims: {**claims, "nonce": "not-the-one-sent"}
    result, _ = await _back(issuer, dashboard, answer)
    assert result.status_code == 422 and "ID token failed a check: nonce" in result.text
    assert "sub = ada" not in result.text
    assert await _tested(db, tenant) == ["id_token:nonce"]
