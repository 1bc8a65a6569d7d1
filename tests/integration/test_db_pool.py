"""The services' asyncpg pool (`frontdoor_core.db.create_pool`, issue #13): releasing a
connection sends no reset query (one round trip saved per acquire), and what must not
leak still does not: a transaction left open is rolled back."""

from __future__ import annotations

import asyncio

from frontdoor_core.db import create_pool


async def test_release_costs_no_round_trip_and_rolls_back_an_open_transaction(migrated: str) -> None:
    pool = await create_pool(migrated, min_size=1, max_size=1)
    sent: list[str] = []
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TEMPORARY TABLE IF NOT EXISTS pool_probe (n int)")
            conn.add_query_logger(lambda record: sent.append(record.query))
            await conn.execute("BEGIN")  # left open on purpose (not a managed transaction)
            await conn.execute("INSERT INTO pool_probe VALUES (1)")
            await asyncio.sleep(0.05)  # query loggers run after the query
            sent.clear()
        await asyncio.sleep(0.05)
        assert not any("RESET ALL" in q or "UNLISTEN" in q for q in sent), sent
        assert sent == ["ROLLBACK"]  # asyncpg's own part: the open transaction is not carried over
        async with pool.acquire() as again:  # the same, only connection
            assert not again.is_in_transaction()
            assert await again.fetchval("SELECT count(*) FROM pool_probe") == 0
    finally:
        await pool.close()
