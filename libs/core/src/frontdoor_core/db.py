"""PostgreSQL access: one asyncpg pool per process and a transaction helper.

Repositories take a connection and never commit; a use case opens the transaction with
`transaction` and passes the connection down, so several calls compose atomically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import msgspec
from opentelemetry import trace

__all__ = ["Connection", "Pool", "create_pool", "transaction"]

Connection = asyncpg.Connection
Pool = asyncpg.Pool

_tracer = trace.get_tracer("frontdoor.db")


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=lambda v: msgspec.json.encode(v).decode(),
            decoder=msgspec.json.decode,
            schema="pg_catalog",
        )


class _TracedConnection(asyncpg.Connection):  # type: ignore[misc]
    """Adds an OpenTelemetry span around every statement (no parameters recorded)."""

    async def _execute(self, query: str, args: Any, limit: int, timeout: Any, **kw: Any) -> Any:  # noqa: ASYNC109 - asyncpg's signature
        with _tracer.start_as_current_span(
            "db " + query.lstrip().split(None, 1)[0].upper() if query.strip() else "db",
            attributes={"db.system": "postgresql", "db.statement": query[:500]},
        ):
            return await super()._execute(query, args, limit, timeout, **kw)


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open the process's pool; statements are traced, JSON columns decode with msgspec."""
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        connection_class=_TracedConnection,
        command_timeout=30,
        server_settings={"application_name": "frontdoor", "timezone": "UTC"},
    )
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """Acquire a connection and run the block in one transaction (commit on success)."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn
