"""In-process apps over the worker's real PostgreSQL and Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

STRONG_PASSWORD = "correct horse battery staple 42"


@pytest.fixture(scope="session")
def web() -> MockWeb:
    """What the console's outbound client sees as the internet (publish checks)."""
    return MockWeb()


@pytest.fixture(scope="session")
async def console(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                  ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_tenancy.scanner import scanner_policy

    # The public scanner sees the same pretend internet: no test reaches real DNS through it.
    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web),
                     scanner_fetcher=SafeFetcher(scanner_policy(), transport=web))
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


@pytest.fixture(scope="session")
async def issuer(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                 ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as client:
        yield client


@dataclass
class TenantHandle:
    id: str
    slug: str
    email: str
    api_key: str
    issuer: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


async def sign_up(console: AsyncTestClient[Any], **overrides: str) -> TenantHandle:
    slug = overrides.get("slug", unique("co-"))
    body = {
        "email": overrides.get("email", f"{slug}@example.com"),
        "password": overrides.get("password", STRONG_PASSWORD),
        "organization_name": overrides.get("organization_name", f"Org {slug}"),
        "slug": slug,
    }
    r = await console.post("/api/v1/signup", json=body)
    assert r.status_code == 201, r.text
    j = r.json()
    return TenantHandle(id=j["tenant"]["id"], slug=slug, email=body["email"], api_key=j["api_key"],
                        issuer=j["tenant"]["issuer"])


@pytest.fixture
async def tenant(console: AsyncTestClient[Any]) -> TenantHandle:
    return await sign_up(console)


@pytest.fixture
async def other_tenant(console: AsyncTestClient[Any]) -> TenantHandle:
    return await sign_up(console)
