"""The migration runner against fresh PostgreSQL databases on the worker's server."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from frontdoor_core.migrations import Migration, MigrationError, apply_migrations, discover

from tests.conftest import MIGRATED_PACKAGES
from tests.support.databases import connected, own_database
from tests.support.eventually import eventually
from tests.support.servers import Servers

TENANCY_TABLES = {
    "tenants",
    "admins",
    "admin_sessions",
    "api_keys",
    "domains",
    "issuer_settings",
    "signing_keys",
    "audit_log",
}


def mig(version: str, name: str, sql: str) -> Migration:
    return Migration(version=version, name=name, package="tests.synthetic", sql=f"-- Why: test {name}.\n{sql}")


M1 = mig("20990101000001", "create_runs", "CREATE TABLE runs (name text PRIMARY KEY);")
M2 = mig("20990101000002", "first_run", "INSERT INTO runs VALUES ('m2');")
M3 = mig("20990101000003", "second_run", "INSERT INTO runs VALUES ('m3');")


@pytest.fixture
async def fresh_url(servers: Servers) -> AsyncIterator[str]:
    """A new, empty database on the worker's server, dropped afterwards."""
    async with own_database(servers, "fd_migrations", migrated=False) as url:
        yield url


@pytest.fixture
async def conn(fresh_url: str) -> AsyncIterator[asyncpg.Connection]:
    async with connected(fresh_url) as c:
        yield c


async def tables(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    return {r["table_name"] for r in rows}


async def history(conn: asyncpg.Connection) -> list[tuple[str, str, str, str]]:
    rows = await conn.fetch("SELECT version, name, package, checksum FROM schema_migrations ORDER BY version")
    return [(r["version"], r["name"], r["package"], r["checksum"]) for r in rows]


async def advisory_locks(conn: asyncpg.Connection, *, granted: bool) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = $1 AND database = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())",
            granted,
        )
    )


# --- the real history ------------------------------------------------------------------


async def test_fresh_database_gets_every_migration_once(conn: asyncpg.Connection, fresh_url: str) -> None:
    migrations = discover(MIGRATED_PACKAGES)
    assert migrations, "no migrations discovered"
    assert await tables(conn) == set()
    applied = await apply_migrations(conn, migrations)
    assert applied == [m.version for m in migrations]
    assert TENANCY_TABLES | {"schema_migrations"} <= await tables(conn)
    assert await history(conn) == [(m.version, m.name, m.package, m.checksum) for m in migrations]
    # a second run, on this connection and on a new one, applies nothing and changes nothing
    assert await apply_migrations(conn, migrations) == []
    other = await asyncpg.connect(fresh_url)
    try:
        assert await apply_migrations(other, discover(MIGRATED_PACKAGES)) == []
    finally:
        await other.close()
    assert await history(conn) == [(m.version, m.name, m.package, m.checksum) for m in migrations]
    assert await advisory_locks(conn, granted=True) == 0  # the lock is released


def test_real_migrations_are_well_formed() -> None:
    migrations = discover(MIGRATED_PACKAGES)
    versions = [m.version for m in migrations]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    for m in migrations:
        assert m.sql.lstrip().startswith("--"), f"{m.version}_{m.name} must start with a comment saying why"


# --- the runner's rules, on synthetic histories ----------------------------------------------


async def test_only_missing_migrations_are_applied_in_version_order(conn: asyncpg.Connection) -> None:
    assert await apply_migrations(conn, [M1, M2]) == [M1.version, M2.version]
    assert await apply_migrations(conn, [M1, M2, M3]) == [M3.version]
    assert [r["name"] for r in await conn.fetch("SELECT name FROM runs ORDER BY name")] == ["m2", "m3"]
    assert await apply_migrations(conn, [M1, M2, M3]) == []


async def test_a_modified_applied_migration_is_refused(conn: asyncpg.Connection) -> None:
    await apply_migrations(conn, [M1, M2])
    before = await history(conn)
    edited = Migration(M2.version, M2.name, M2.package, M2.sql + "\n-- tidied up later")
    assert edited.checksum != M2.checksum
    with pytest.raises(MigrationError, match="modified"):
        await apply_migrations(conn, [M1, edited, M3])
    assert await history(conn) == before  # and nothing after it was applied
    assert await conn.fetchval("SELECT count(*) FROM runs") == 1
    assert await advisory_locks(conn, granted=True) == 0


async def test_a_database_with_an_unknown_version_is_refused(conn: asyncpg.Connection) -> None:
    await apply_migrations(conn, [M1, M2])
    before = await history(conn)
    # older code (it knows M1 and a newer M3 of its own, but not M2) meets a newer database
    with pytest.raises(MigrationError, match="does not know"):
        await apply_migrations(conn, [M1, M3])
    assert await history(conn) == before
    assert await conn.fetchval("SELECT count(*) FROM runs WHERE name = 'm3'") == 0
    assert await advisory_locks(conn, granted=True) == 0


async def test_a_failing_migration_rolls_back_alone_and_stops_the_run(conn: asyncpg.Connection) -> None:
    broken = mig("20990101000002", "broken", "INSERT INTO runs VALUES ('half');\nSELEC oops;")
    with pytest.raises(asyncpg.PostgresSyntaxError):
        await apply_migrations(conn, [M1, broken, M3])
    assert [v for v, *_ in await history(conn)] == [M1.version]
    assert await conn.fetchval("SELECT count(*) FROM runs") == 0  # the broken file's insert was rolled back
    assert await advisory_locks(conn, granted=True) == 0
    # once fixed (it was never applied, so it may change), the run completes
    assert await apply_migrations(conn, [M1, M2, M3]) == [M2.version, M3.version]


async def test_concurrent_runners_do_not_double_apply(fresh_url: str, conn: asyncpg.Connection) -> None:
    """Runner A is held inside a migration; runner B must wait on the advisory lock, then apply nothing."""
    await conn.execute("CREATE TABLE gate (x int)")
    slow = mig("20990101000001", "create_runs", "INSERT INTO gate VALUES (1);\nCREATE TABLE runs (name text);")
    history_ = [slow, M2, M3]
    a_conn, b_conn = await asyncpg.connect(fresh_url), await asyncpg.connect(fresh_url)
    a_pid, b_pid = a_conn.get_server_pid(), b_conn.get_server_pid()
    tasks: list[asyncio.Task[list[str]]] = []
    gate = conn.transaction()
    await gate.start()
    gate_closed = True
    try:
        await conn.execute("LOCK TABLE gate IN ACCESS EXCLUSIVE MODE")
        a = asyncio.create_task(apply_migrations(a_conn, history_))
        tasks.append(a)

        async def a_is_blocked_in_the_migration() -> None:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'relation' AND NOT granted", a_pid
            )
            assert waiting == 1

        await eventually(a_is_blocked_in_the_migration)
        b = asyncio.create_task(apply_migrations(b_conn, history_))
        tasks.append(b)

        async def b_waits_for_the_runner_lock() -> None:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted", b_pid
            )
            assert waiting == 1

        await eventually(b_waits_for_the_runner_lock)
        assert not a.done() and not b.done()
        await gate.rollback()  # open the gate
        gate_closed = False
        applied_a, applied_b = await asyncio.wait_for(asyncio.gather(a, b), timeout=30)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if gate_closed:
            await gate.rollback()
        a_conn.terminate()
        b_conn.terminate()
    assert applied_a == [slow.version, M2.version, M3.version]
    assert applied_b == []
    assert [v for v, *_ in await history(conn)] == [m.version for m in history_]
    assert sorted(r["name"] for r in await conn.fetch("SELECT name FROM runs")) == ["m2", "m3"]  # once each


async def test_concurrent_runners_without_a_gate_still_apply_once(fresh_url: str) -> None:
    conns = [await asyncpg.connect(fresh_url) for _ in range(4)]
    try:
        results = await asyncio.gather(*(apply_migrations(c, [M1, M2, M3]) for c in conns))
        assert sorted(len(r) for r in results) == [0, 0, 0, 3]
        assert sorted(r["name"] for r in await conns[0].fetch("SELECT name FROM runs")) == ["m2", "m3"]
    finally:
        for c in conns:
            await c.close()


# --- discovery ------------------------------------------------------------------------------


def _package(root: Path, files: dict[str, str], *, with_migrations: bool = True) -> str:
    name = f"fdmig_{secrets.token_hex(5)}"
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    if with_migrations:
        (pkg / "migrations").mkdir()
        for filename, sql in files.items():
            (pkg / "migrations" / filename).write_text(sql)
    return name


def test_discover_orders_one_history_across_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    a = _package(
        tmp_path, {"20260102000000_second.sql": "-- b\n", "README.md": "notes", "20260301000000_fourth.sql": "-- d\n"}
    )
    b = _package(tmp_path, {"20260101000000_first.sql": "-- a\n", "20260201000000_third.sql": "-- c\n"})
    empty = _package(tmp_path, {}, with_migrations=False)
    found = discover([a, b, empty])
    assert [(m.version, m.name) for m in found] == [
        ("20260101000000", "first"),
        ("20260102000000", "second"),
        ("20260201000000", "third"),
        ("20260301000000", "fourth"),
    ]
    assert [m.package for m in found] == [b, a, b, a]
    assert found[0].sql == "-- a\n"


@pytest.mark.parametrize(
    "filename",
    [
        "2026010100000_short.sql",
        "20260101000000-dash.sql",
        "20260101000000_Upper.sql",
        "first.sql",
        "20260101000000_.sql",
    ],
)
def test_discover_refuses_badly_named_sql(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filename: str) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = _package(tmp_path, {filename: "-- x\n"})
    with pytest.raises(MigrationError, match="badly named"):
        discover([pkg])


def test_discover_refuses_two_migrations_with_one_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    a = _package(tmp_path, {"20260101000000_one.sql": "-- a\n"})
    b = _package(tmp_path, {"20260101000000_other.sql": "-- b\n"})
    with pytest.raises(MigrationError, match="share version 20260101000000"):
        discover([a, b])


def test_checksum_follows_the_sql() -> None:
    same = Migration(M1.version, M1.name, "another.package", M1.sql)
    assert same.checksum == M1.checksum
    assert Migration(M1.version, M1.name, M1.package, M1.sql + " ").checksum != M1.checksum
