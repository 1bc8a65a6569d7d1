"""PostgreSQL and Redis for one test process: the configured ones or embedded ones.

With ``DATABASE_URL`` set, each xdist worker gets its own fresh database on that server;
with ``REDIS_URL`` set, its own database number. Otherwise each worker starts its own
embedded pair in a private temporary folder, stopped when the session ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg


@dataclass
class Servers:
    database_url: str
    redis_url: str
    _stops: list[object] = field(default_factory=list)

    def stop(self) -> None:
        for s in reversed(self._stops):
            s.stop()  # type: ignore[attr-defined]


def _worker_index(worker_id: str) -> int:
    return int(worker_id[2:]) if worker_id.startswith("gw") else 0


async def fresh_database(admin_url: str, name: str) -> str:
    """Database ``name`` made new (dropped first if it is there) on ``admin_url``'s server; its URL."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


async def start_servers(worker_id: str) -> Servers:
    from frontdoor_devstack.postgres import EmbeddedPostgres
    from frontdoor_devstack.redis_server import EmbeddedRedis

    stops: list[object] = []
    root = Path(tempfile.mkdtemp(prefix=f"fdtest-{worker_id}-"))
    os.chmod(root, 0o711)  # the embedded server may run as 'nobody': it must traverse this folder

    class _Cleanup:
        def stop(self) -> None:
            shutil.rmtree(root, ignore_errors=True)

    stops.append(_Cleanup())
    name = f"frontdoor_test_{worker_id}"
    if os.environ.get("DATABASE_URL"):
        db_url = await fresh_database(os.environ["DATABASE_URL"], name)
    else:
        pg = EmbeddedPostgres(root / "pg", database=name, durable=False)
        pg.start()
        stops.append(pg)
        db_url = pg.url
    if os.environ.get("REDIS_URL"):
        base = os.environ["REDIS_URL"].rstrip("/")
        parts = urlsplit(base)
        db_index = 1 + _worker_index(worker_id) % 15
        redis_url = urlunsplit((parts.scheme, parts.netloc, f"/{db_index}", parts.query, ""))
    else:
        rs = EmbeddedRedis(root / "redis", durable=False)
        rs.start()
        stops.append(rs)
        redis_url = rs.url
    return Servers(database_url=db_url, redis_url=redis_url, _stops=stops)
