"""How many SQL round trips one agent confirm costs (issue #13 §4), pinned so a regression shows.

Counted in asyncpg, for every connection of this process while one confirm is served (the
ledger's pool, its perform fast path, the listener): each statement executed (``fetch``,
``execute`` with or without arguments, ``executemany``), ``BEGIN``/``COMMIT`` included,
plus each statement prepared because it was not in the connection's statement cache (one
more round trip). A first confirm warms the caches, as a running ledger's are.

The count can go down only deliberately: a change that adds a statement to the confirm
fails here, with the list of statements to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from frontdoor_operations import ledger
from frontdoor_webhooks.parking import lock_endpoint

from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock


def _head(query: str) -> str:
    """A statement's first words, enough to tell it apart in a failure's list."""
    return re.sub(r"\s+", " ", query).strip()[:90]


@contextlib.contextmanager
def statements() -> Iterator[list[str]]:
    """Every SQL round trip of this process meanwhile: ``prepare: <sql>`` or the statement."""
    sent: list[str] = []
    cls: Any = asyncpg.Connection
    execute, bind_execute, many, get_statement = (
        cls.execute, cls._Connection__execute, cls._executemany, cls._get_statement)

    async def on_execute(self: Any, query: str, *args: Any, timeout: float | None = None) -> Any:
        if not args:  # with arguments it goes through __execute, counted there
            sent.append(_head(query))
        return await execute(self, query, *args, timeout=timeout)

    async def on_bind_execute(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        sent.append(_head(query))
        return await bind_execute(self, query, *args, **kw)

    async def on_many(self: Any, query: str, *args: Any, **kw: Any) -> Any:
        sent.append(_head(query))
        return await many(self, query, *args, **kw)

    async def on_get_statement(self: Any, query: str, timeout: Any, **kw: Any) -> Any:
        cached = self._stmt_cache.get((query, kw.get("record_class") or self._protocol.get_record_class(),
                                       kw.get("ignore_custom_codec", False)))
        if cached is None or kw.get("use_cache") is False:
            sent.append("prepare: " + _head(query))
        return await get_statement(self, query, timeout, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cls, "execute", on_execute)
        mp.setattr(cls, "_Connection__execute", on_bind_execute)
        mp.setattr(cls, "_executemany", on_many)
        mp.setattr(cls, "_get_statement", on_get_statement)
        yield sent


async def test_a_confirm_with_the_fast_path_sends_12_sql_statements(shop: Shop, agent: TestAgent) -> None:
    """OPS-3-02, OPS-6-02: a confirm that wins, is performed on the fast path and answered with its outcome.

    The 12, in order: the Session with the agent policy (authentication, one statement); the
    operation with its kind's targets; the confirm's transaction (``BEGIN``, the compare-and-set
    answering the operation, taking the endpoint's parking lock and reading the
    ``operation.confirmed`` subscribers, the perform message written already claimed for this
    attempt with the endpoint's signing secrets, ``COMMIT``); the settle's transaction (``BEGIN``, the attempt with the
    message's state, ``SAVEPOINT``, the outcome superseding the perform message, whose row
    lock the settle already holds, and reading the ``operation.*`` subscribers, ``RELEASE``,
    ``COMMIT``).
    """
    _, tokens, warm = await proposed(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], warm)).json()["state"] == "succeeded"
    _, tokens, op = await proposed(shop, agent)
    with statements() as sent:
        r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    assert not [s for s in sent if s.startswith("prepare: ")], sent  # a warm ledger prepares nothing again
    assert len(sent) == 12, "\n".join(sent)


async def test_the_confirm_takes_the_parking_lock_before_its_perform_message_is_written(
        shop: Shop, agent: TestAgent, runtime: Any, clock: ShiftableClock) -> None:
    """The compare-and-set takes the endpoint's parking lock itself: a disable in progress is waited for.

    A disable committed while the confirm waited is seen by the message's insert, so the perform
    message is parked, not sent to a disabled endpoint (``parking``). Fails when the confirm
    writes its message without waiting for the lock.
    """
    _, _, op = await proposed(shop, agent)
    async with runtime.pool.acquire() as holder, holder.transaction():
        await lock_endpoint(holder, shop.endpoint_id)  # as disabling the endpoint takes it

        async def confirm() -> str | None:
            async with runtime.pool.acquire() as conn:
                _, message_id = await ledger.confirm(conn, shop.tenant.id, op["operation_id"], revision=op["revision"],
                                                     approved_by="user", via="agent", now=clock())
            return message_id

        confirming = asyncio.create_task(confirm())
        for _ in range(500):  # until the confirm waits for the lock (or is done: then it did not wait)
            waiting = await holder.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
            if waiting or confirming.done():
                break
            await asyncio.sleep(0.02)
        assert waiting == 1 and not confirming.done()
        await holder.execute("UPDATE webhook_endpoints SET enabled = false WHERE tenant_id = $1 AND id = $2",
                             shop.tenant.id, shop.endpoint_id)
    message_id = await confirming
    assert message_id is not None
    async with runtime.pool.acquire() as conn:
        parked = await conn.fetchval("SELECT parked FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                                     shop.tenant.id, message_id)
    assert parked is True


@pytest.mark.parametrize("held", ["perform", "other"])
async def test_an_outcome_with_a_held_message_is_recorded_and_stops_the_perform_message(
        shop: Shop, agent: TestAgent, runtime: Any, clock: ShiftableClock, held: str) -> None:
    """OPS-6-02: ``record_outcome``'s ``held_message`` (the settle's lock) skips only the locking statement.

    The perform message held: the outcome is one statement. Another message named (not the
    operation's): the outcome takes the usual path, locking the perform message first. Either
    way the outcome is final and its perform message superseded in the same transaction.
    """
    _, _, op = await proposed(shop, agent)
    async with runtime.pool.acquire() as conn:
        _, message_id = await ledger.confirm(conn, shop.tenant.id, op["operation_id"], revision=op["revision"],
                                             approved_by="user", via="agent", now=clock())
        assert message_id is not None
        async with conn.transaction():
            await conn.execute("SELECT 1 FROM webhook_messages WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                               shop.tenant.id, message_id)
            with statements() as sent:
                done, changed = await ledger.record_outcome(
                    conn, shop.tenant.id, op["operation_id"], outcome="succeeded", result={"summary": "Ordered."},
                    now=clock(), held_message=message_id if held == "perform" else "msg_01M8W0000000000000000000")
        state, superseded = await conn.fetchrow(
            "SELECT state, superseded_at IS NOT NULL FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
            shop.tenant.id, message_id)
    assert changed and done.state == "succeeded"
    assert (state, superseded) == ("superseded", True)  # never sent again (it was still pending)
    locks = [s for s in sent if s.startswith("SELECT 1 FROM webhook_messages AS m")]
    assert len(locks) == (0 if held == "perform" else 1), sent


async def test_the_confirm_and_its_outcome_still_write_their_events_to_subscribers(
        shop: Shop, agent: TestAgent, runtime: Any) -> None:
    """The ``operation.confirmed`` and ``operation.succeeded`` subscribers, read by the transitions' own
    statements, each get their event in that transaction (one message per subscribed endpoint)."""
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_endpoints SET event_types = event_types || $3::text[]"
                           " WHERE tenant_id = $1 AND id = $2", shop.tenant.id, shop.endpoint_id,
                           ["operation.confirmed", "operation.succeeded"])
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT event_type, endpoint_id FROM webhook_messages WHERE tenant_id = $1 AND purpose = 'event'"
            " AND body::jsonb -> 'data' -> 'operation' ->> 'operation_id' = $2 ORDER BY event_type",
            shop.tenant.id, op["operation_id"])
    assert [(row["event_type"], row["endpoint_id"]) for row in rows] == [
        ("operation.confirmed", shop.endpoint_id), ("operation.succeeded", shop.endpoint_id)]
