"""``make run OIDC=1`` (issue #18): the second demo tenant and the local OpenID Provider it signs in at.

What `frontdoor_devstack.run` does under the switch, piece by piece, on the worker's
PostgreSQL: the IdP started as the devstack starts it (`oidc_demo.local_idp`: the same
``idp.mjs``, its demo users and their password), the tenant seeded and connected
(`seed_oidc_tenant`, `ensure_oidc_login`), then the real issuer app: the tenant's metadata is
served, its authorize endpoint sends the browser to that IdP, and the demo user's printed
password (and only it) gets through the IdP back to Frontdoor's consent page.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest
from frontdoor_core.outbound import (
    AddressRules,
    GuardedNetworkBackend,
    GuardedTransport,
    OutboundPolicy,
    SafeFetcher,
    SystemResolver,
)
from frontdoor_core.outbound.guarded_transport import strict_ssl_context
from frontdoor_core.settings import Settings
from frontdoor_devstack import oidc_demo
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.signin.conftest import new_agent
from tests.integration.signin.test_device_pages import csrf
from tests.integration.signin.test_direct_sign_in import callback, params
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import login_at_idp

POLICY = OutboundPolicy(allow_http_loopback=True)


def test_the_switch() -> None:
    assert oidc_demo.wanted({}) is False  # make run without it: nothing changes
    assert oidc_demo.wanted({"FRONTDOOR_DEMO_OIDC": "1"}) is True
    assert oidc_demo.wanted({"FRONTDOOR_DEMO_OIDC": "0"}) is False
    with pytest.raises(ValueError, match="FRONTDOOR_DEMO_OIDC"):
        oidc_demo.wanted({"FRONTDOOR_DEMO_OIDC": "maybe"})


class Loopback(httpx.AsyncBaseTransport):
    """The issuer's outbound network: the local IdP over a real (guarded) socket, the agents in `MockWeb`."""

    def __init__(self, web: MockWeb, port: int) -> None:
        self.web, self.port = web, port
        self.real = GuardedTransport(GuardedNetworkBackend(AddressRules(POLICY), SystemResolver()),
                                     strict_ssl_context(None))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "127.0.0.1" and request.url.port == self.port:
            return await self.real.handle_async_request(request)
        return await self.web.handle_async_request(request)


class Demo:
    def __init__(self, data_dir: Path, idp: oidc_demo.LocalIdp, slug: str) -> None:
        self.data_dir, self.idp, self.slug = data_dir, idp, slug


@pytest.fixture(scope="module")
def demo(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    data_dir = tmp_path_factory.mktemp("devstack-oidc")
    secrets_ = oidc_demo.idp_secrets(data_dir)
    port = oidc_demo.choose_port(int(secrets_.get("port") or 0))
    slug = unique("demo-oidc-")
    idp = oidc_demo.local_idp(settings.issuer_base_url, secrets_, port, slug=slug)
    oidc_demo.remember_port(data_dir, secrets_, port)
    proc = subprocess.Popen(idp.argv, env=idp.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{idp.issuer}/.well-known/openid-configuration", timeout=1) as r:
                    assert json.load(r)["issuer"] == idp.issuer
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the local IdP did not start"
                time.sleep(0.1)
        yield Demo(data_dir, idp, slug)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_the_second_tenant_signs_in_at_the_local_idp(settings: Settings, migrated: str, runtime: Any,
                                                           clock: ShiftableClock, web: MockWeb, demo: Demo) -> None:
    from frontdoor_issuer.app import create_app

    saved = json.loads((demo.data_dir / "oidc-idp.json").read_text())
    assert saved["port"] == int(demo.idp.issuer.rsplit(":", 1)[1])  # the next run tries the same port first
    assert (demo.data_dir / "oidc-idp.json").stat().st_mode & 0o777 == 0o600
    creds = await oidc_demo.seed_oidc_tenant(settings, demo.data_dir, slug=demo.slug)
    assert creds["tenant_id"] and creds["api_key"].startswith("fdk_")
    assert await oidc_demo.seed_oidc_tenant(settings, demo.data_dir, slug=demo.slug) == creds  # once
    assert await oidc_demo.ensure_oidc_login(settings, creds["tenant_id"], demo.idp) is True
    assert await oidc_demo.ensure_oidc_login(settings, creds["tenant_id"], demo.idp) is False  # idempotent
    async with runtime.pool.acquire() as conn:
        stored = await conn.fetchval("SELECT secret_ciphertext FROM oidc_client_secrets WHERE tenant_id = $1",
                                     creds["tenant_id"])
    assert stored is not None and demo.idp.client_secret.encode() not in bytes(stored)  # KEK-encrypted

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(POLICY, transport=Loopback(web, int(
        demo.idp.issuer.rsplit(":", 1)[1]))))
    async with AsyncTestClient(app, base_url=settings.issuer_base_url) as issuer:
        # The tenant's issuer metadata is served.
        tenant_issuer = f"{settings.issuer_base_url}/{demo.slug}"
        r = await issuer.get(f"/.well-known/oauth-authorization-server/{demo.slug}")
        assert r.status_code == 200, r.text
        meta = r.json()
        assert meta["issuer"] == tenant_issuer
        assert meta["authorization_endpoint"] == f"{tenant_issuer}/oauth/authorize"
        assert meta["device_authorization_endpoint"] == f"{tenant_issuer}/oauth/device"

        # Its authorize endpoint sends the browser to the local IdP.
        agent = new_agent(web)
        query, started = params(agent, scope="poppy:read")
        r = await issuer.get(f"/{demo.slug}/oauth/authorize", params=query, follow_redirects=False)
        assert r.status_code == 303, r.text
        location = r.headers["location"]
        assert location.startswith(f"{demo.idp.issuer}/auth?"), location
        sent = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        assert sent["client_id"] == oidc_demo.OIDC_CLIENT_ID and sent["code_challenge_method"] == "S256"
        assert sent["redirect_uri"] == f"{tenant_issuer}/oidc/callback"

        async with httpx.AsyncClient(follow_redirects=False, timeout=10) as browser:
            # A wrong password is refused at the IdP ...
            interaction = urljoin(location, (await browser.get(location)).headers["location"])
            page = await browser.get(interaction)
            assert page.status_code == 200 and 'name="password"' in page.text
            wrong = await browser.post(interaction, data={"prompt": "login", "login": "ada", "password": "guess"})
            assert wrong.status_code == 401 and "Wrong login or password" in wrong.text
            # ... the printed one signs the demo user in, and the IdP sends the browser back to Frontdoor.
            back_url = await login_at_idp(location, login="ada", password=demo.idp.password,
                                          stop_at=f"{tenant_issuer}/oidc/callback", browser=browser)
        r = await issuer.get(back_url[len(settings.issuer_base_url):], follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"{tenant_issuer}/consent", r.text
        consent = await issuer.get(f"/{demo.slug}/consent")
        assert consent.status_code == 200 and "ada" in consent.text and oidc_demo.OIDC_ORGANIZATION in consent.text
        decided = await issuer.post(f"/{demo.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                                   "decision": "allow", "scope": ["poppy:read"]},
                                    follow_redirects=False)
        assert decided.status_code == 303, decided.text
        answer = callback(decided.headers["location"], started)
        assert answer["code"] and answer["state"] == started.state and answer["iss"] == tenant_issuer


async def test_a_moved_idp_port_is_followed(settings: Settings, migrated: str, runtime: Any, tmp_path: Path) -> None:
    creds = await oidc_demo.seed_oidc_tenant(settings, tmp_path, slug=unique("demo-oidc-"))
    secrets_ = oidc_demo.idp_secrets(tmp_path)
    first = oidc_demo.local_idp(settings.issuer_base_url, secrets_, 40001, slug=creds["slug"])
    moved = oidc_demo.local_idp(settings.issuer_base_url, secrets_, 40002, slug=creds["slug"])
    assert await oidc_demo.ensure_oidc_login(settings, creds["tenant_id"], first) is True
    assert await oidc_demo.ensure_oidc_login(settings, creds["tenant_id"], moved) is True
    async with runtime.pool.acquire() as conn:
        login = await conn.fetchval("SELECT settings->'login' FROM issuer_settings WHERE tenant_id = $1",
                                    creds["tenant_id"])
    login = json.loads(login) if isinstance(login, str) else login
    assert login["type"] == "oidc" and login["issuer"] == "http://127.0.0.1:40002"
    assert login["client_id"] == oidc_demo.OIDC_CLIENT_ID and login["client_secret"] is None
    assert login["backchannel_logout"] is True
