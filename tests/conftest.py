"""Shared fixtures: one PostgreSQL + Redis pair per xdist worker, migrated once.

Tests isolate by data, not by truncation: every test signs up its own tenants with
unique slugs and emails, so they run concurrently on one schema.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from frontdoor_core.db import create_pool
from frontdoor_core.migrations import (
    MIGRATED_PACKAGES,
    apply_migrations,
    discover,
)
from frontdoor_core.redis_client import create_redis
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings, load_settings
from frontdoor_tenancy.credentials.key_encryption import generate_kek_value

from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.servers import Servers, start_servers
from tests.support.settings_env import settings_env


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep the tests that share a module-scoped fixture on one xdist worker.

    Under ``--dist loadgroup`` (``make test``) every such test carries its module's name
    as its ``xdist_group``, so an expensive module fixture (a whole ``make run`` stack, a
    browser, an OpenID provider) is built once, not once per worker that happens to
    receive one of its tests. Runs before xdist reads the marks (``tryfirst``).
    """
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))

@pytest.fixture(scope="session")
async def servers(worker_id: str) -> AsyncIterator[Servers]:
    s = await start_servers(worker_id)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def dns() -> Iterator[LocalDNS]:
    with LocalDNS() as server:
        yield server


@pytest.fixture(scope="session")
def kek_value() -> str:
    return generate_kek_value()


@pytest.fixture(scope="session")
def settings(servers: Servers, dns: LocalDNS, kek_value: str) -> Settings:
    return load_settings(settings_env(servers, dns, kek_value))


@pytest.fixture(scope="session")
async def migrated(servers: Servers) -> str:
    pool = await create_pool(servers.database_url, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            await apply_migrations(conn, discover(MIGRATED_PACKAGES))
    finally:
        await pool.close()
    return servers.database_url


@pytest.fixture(scope="session")
def clock() -> ShiftableClock:
    return ShiftableClock()


@pytest.fixture(autouse=True)
def _reset_clock(clock: ShiftableClock) -> Iterator[None]:
    yield
    clock.reset()


@pytest.fixture(scope="session")
async def runtime(settings: Settings, migrated: str, clock: ShiftableClock) -> AsyncIterator[Runtime]:
    pool = await create_pool(settings.database_url, min_size=1, max_size=10)
    redis = create_redis(settings.redis_url)
    rt = Runtime(settings=settings, pool=pool, redis=redis, clock=clock, owned=False)
    try:
        yield rt
    finally:
        await redis.aclose()
        await pool.close()


@pytest.fixture
async def db(runtime: Runtime) -> AsyncIterator[Any]:
    async with runtime.pool.acquire() as conn:
        yield conn


def unique(prefix: str = "t") -> str:
    return f"{prefix}{secrets.token_hex(5)}"
