"""PostgreSQL access: one asyncpg pool per process and a transaction helper.

Repositories take a connection and never commit; a use case opens the transaction with
`transaction` and passes the connection down, so several calls compose atomically.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg
import msgspec

__all__ = ["Connection", "Pool", "create_pool", "open_connections", "transaction"]

Connection = asyncpg.Connection
Pool = asyncpg.Pool


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(
            typ,
            encoder=lambda v: msgspec.json.encode(v).decode(),
            decoder=msgspec.json.decode,
            schema="pg_catalog",
        )


async def _release(conn: asyncpg.Connection) -> None:
    """What a connection needs when it goes back to the pool: nothing beyond asyncpg's own part.

    asyncpg rolls back a transaction left open and drops the connection's listeners before
    calling this. Its default would then send ``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL`` on every release: one more round trip for every ``acquire``.
    Pooled connections never keep that state here: ``LISTEN`` (the outbox relay, the event
    forwarder, the SSF wake-ups) uses its own connections, the migrations' session advisory
    lock is released in their ``finally``, cursors live inside transactions, and nothing
    issues a session ``SET`` (``SET LOCAL`` ends with its transaction).
    """


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """Open the process's pool; JSON columns decode with msgspec.

    Statements are traced by OpenTelemetry's asyncpg instrumentation
    (`frontdoor_core.telemetry.instrument_libraries`), without their parameters. Releasing
    a connection costs no round trip (`_release`).
    """
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_release,
        command_timeout=30,
        server_settings={"application_name": "frontdoor", "timezone": "UTC"},
    )
    assert pool is not None
    return pool


async def open_connections(pool: asyncpg.Pool, count: int, *, each_timeout: float = 10.0) -> int:
    """Open up to `count` connections now (capped at the pool's maximum); answers how many are open.

    For a process about to take traffic (`Runtime.open`): without it a fresh pool holds its
    minimum and connects the rest, one request at a time, under the first burst. They are
    acquired together and released idle, so asyncpg keeps them until they have been idle for
    its `max_inactive_connection_lifetime` (5 minutes), then closes them down to the minimum.
    Best effort: a connection that cannot be opened (PostgreSQL's `max_connections` reached,
    past `each_timeout` seconds) is left for the pool to open on demand, as before, and does
    not fail the start.
    """
    wanted = min(count, pool.get_max_size()) - pool.get_size()
    if wanted > 0:
        async with AsyncExitStack() as held:
            async def one() -> None:
                await held.enter_async_context(pool.acquire(timeout=each_timeout))

            await asyncio.gather(*(one() for _ in range(pool.get_idle_size() + wanted)), return_exceptions=True)
    return int(pool.get_size())


@asynccontextmanager
async def transaction(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """Acquire a connection and run the block in one transaction (commit on success)."""
    async with pool.acquire() as conn, conn.transaction():
        yield conn
