"""The login and sign-up limits cannot be dodged by respelling the email or rotating IPv6 addresses."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.support.clock import ShiftableClock
from tests.support.fixed_windows import room_in_window


async def _login(client: Any, email: str, password: str, **kw: Any) -> Any:
    page = await client.get("/login", **kw)
    token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    return await client.post("/login", data={"email": email, "password": password, "_csrf_token": token},
                             follow_redirects=False, **kw)


async def test_respelt_emails_share_one_login_bucket(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    console.cookies.clear()
    await room_in_window(900, needed_s=20)  # the 11 attempts fall in one 15-minute window of the login limit
    local, domain = tenant.email.split("@")
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in local)
    variants = [
        tenant.email.upper(),
        f"  {tenant.email}  ",
        f"{tenant.email}.",
        f"{tenant.email}..",
        f"{fullwidth}@{domain}",
        f"{local}＠{domain}",
        f"{local}@{domain.replace('.', '。')}",
        f"{local.title()}@{domain.upper()}.",
        f"\t{tenant.email.swapcase()}",
        f"{fullwidth.upper()}@{domain}",
    ]
    statuses = [(await _login(console, v, f"wrong password {i}")).status_code for i, v in enumerate(variants)]
    assert statuses == [401] * 10
    # the eleventh attempt, in the plain spelling and with the right password, is over the limit
    assert (await _login(console, tenant.email, STRONG_PASSWORD)).status_code == 429
    console.cookies.clear()


async def test_a_fullwidth_spelling_signs_in_to_the_same_admin(console: AsyncTestClient[Any],
                                                               tenant: TenantHandle) -> None:
    console.cookies.clear()
    local, domain = tenant.email.split("@")
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in local)
    assert (await _login(console, f"{fullwidth}@{domain.upper()}.", STRONG_PASSWORD)).status_code == 303
    console.cookies.clear()


@pytest.fixture
async def limited(settings: Settings, migrated: str, clock: ShiftableClock
                  ) -> AsyncIterator[Callable[[str], Any]]:
    """A console with small per-network limits, and a client whose TCP peer is ``x-test-peer``."""
    from frontdoor_console.app import create_app

    small = msgspec.structs.replace(settings, login_network_rate_limit=3, signup_rate_limit=2)
    app = create_app(small, clock=clock)
    inner = app.asgi_handler

    async def with_peer(scope: Any, receive: Any, send: Any) -> None:
        peer = dict(scope.get("headers", [])).get(b"x-test-peer")
        if peer:
            scope["client"] = (peer.decode(), 4711)
        await inner(scope, receive, send)

    app.asgi_handler = with_peer  # the test transport always says the peer is "testclient"
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:

        def client_from(peer: str) -> Any:
            client.headers["x-test-peer"] = peer
            return client

        yield client_from


async def test_rotating_ipv6_addresses_in_one_64_share_the_network_login_limit(
        limited: Callable[[str], Any]) -> None:
    prefix = f"2001:db8:{secrets_hex()}:7"
    statuses = []
    await room_in_window(900, needed_s=20)  # the 4 attempts fall in one 15-minute window of the network limit
    for n in range(1, 5):
        # a different address, and a different (unknown) email each time
        client = limited(f"{prefix}:{n:x}:{n * 7:x}::{n:x}")
        statuses.append((await _login(client, f"{unique('x')}@example.com", "whatever it is")).status_code)
    assert statuses == [401, 401, 401, 429]
    # the neighbouring /64 is another subscriber
    other = limited(f"2001:db8:{secrets_hex()}:8::1")
    assert (await _login(other, f"{unique('x')}@example.com", "whatever it is")).status_code == 401


async def test_ipv4_addresses_are_counted_one_by_one(limited: Callable[[str], Any]) -> None:
    base = f"198.51.{int(secrets_hex()[:2], 16)}"
    for n in range(1, 5):
        r = await _login(limited(f"{base}.{n}"), f"{unique('x')}@example.com", "whatever it is")
        assert r.status_code == 401


async def test_sign_up_is_limited_per_ipv6_64(limited: Callable[[str], Any]) -> None:
    prefix = f"2001:db8:{secrets_hex()}:1"
    statuses = []
    await room_in_window(3600, needed_s=20)  # the 3 sign-ups fall in one hour of the sign-up limit
    for n in range(1, 4):
        slug = unique("lim-")
        r = await limited(f"{prefix}::{n:x}").post("/api/v1/signup", json={
            "email": f"{slug}@example.com", "password": STRONG_PASSWORD, "organization_name": "Org", "slug": slug})
        statuses.append(r.status_code)
    assert statuses == [201, 201, 429]
    assert r.json()["code"] == "rate_limited"
    assert "retry-after" in r.headers


def secrets_hex() -> str:
    import secrets

    return secrets.token_hex(2)
