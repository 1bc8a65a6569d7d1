"""The dashboard's "Test connection" of an ``oidc`` login connection against a real OpenID
Provider (npm ``oidc-provider``): after discovery and the JWKS, the client credentials are
tried at the IdP's token endpoint with a never issued code. ``invalid_grant`` means the
credentials were accepted, ``invalid_client`` that they were rejected (RFC 6749 §5.2); a
wrong issuer and an IdP that is down are said as such. Never a secret on the page."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_oidc_connection import put_login
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import IdpInternet, OpenIdProvider, new_key

POLICY = OutboundPolicy(allow_http_loopback=True)
SECRET = "idp-secret-" + secrets.token_urlsafe(24)
WRONG = "not-the-secret-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def idp() -> Iterator[OpenIdProvider]:
    common = {"client_secret": SECRET, "redirect_uris": ["https://issuer.frontdoor.test/x/oidc/callback"],
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
