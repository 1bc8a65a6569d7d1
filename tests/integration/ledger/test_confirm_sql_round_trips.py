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

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed
from tests.support.agent import TestAgent


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


async def test_a_confirm_with_the_fast_path_sends_19_sql_statements(shop: Shop, agent: TestAgent) -> None:
    """OPS-3-02, OPS-6-02: a confirm that wins, is performed on the fast path and answered with its outcome.

    The 19, in order: the Session and the agent policy (authentication); the operation with
    its kind's targets; the confirm's transaction (``BEGIN``, the compare-and-set answering
    the operation, the endpoint's parking lock, the perform message with its notification,
    the ``operation.confirmed`` subscribers, ``COMMIT``); the claim with the endpoint's
    signing secrets; the settle's transaction (``BEGIN``, the attempt with the message's
    state, ``SAVEPOINT``, the perform message locked, the outcome, the message superseded,
    the ``operation.*`` subscribers, ``RELEASE``, ``COMMIT``).
    """
    _, tokens, warm = await proposed(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], warm)).json()["state"] == "succeeded"
    _, tokens, op = await proposed(shop, agent)
    with statements() as sent:
        r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    assert not [s for s in sent if s.startswith("prepare: ")], sent  # a warm ledger prepares nothing again
    assert len(sent) == 19, "\n".join(sent)
