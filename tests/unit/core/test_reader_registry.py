"""`ReaderRegistry`, the one shape of the ledger's conversation waiters, the inbox's streams and
the confirms waiting for an outcome: readers are woken by their key only, all at once when the
process stops, and a key leaves the registry with its last reader."""

from __future__ import annotations

import asyncio
import contextlib

from frontdoor_conversations.wakeups import Subscription
from frontdoor_core.readers import ReaderRegistry
from frontdoor_operations.settled import OutcomeWaiters


class _Reader:
    def __init__(self) -> None:
        self.changed = asyncio.Event()


async def test_readers_are_woken_by_their_key_and_leave_with_their_block() -> None:
    registry: ReaderRegistry[_Reader] = ReaderRegistry(_Reader)
    with registry.subscribe("ten_a") as inbox, registry.subscribe("ten_a:cnv_1") as page, \
            registry.subscribe("ten_b:cnv_1") as other:
        assert len(registry) == 3
        registry.wake("ten_a:cnv_1")
        assert page.changed.is_set() and not inbox.changed.is_set() and not other.changed.is_set()
        registry.wake("ten_a", "ten_a:cnv_2")
        assert inbox.changed.is_set() and not other.changed.is_set()
        assert registry.of("ten_a", "ten_b:cnv_1") == (inbox, other)
        with registry.subscribe("ten_b:cnv_1") as second:
            assert len(registry.of("ten_b:cnv_1")) == 2
            registry.wake_all()
            assert other.changed.is_set() and second.changed.is_set()
        assert registry.of("ten_b:cnv_1") == (other,)
    assert len(registry) == 0 and registry._readers == {}  # no empty sets kept


async def test_a_reader_leaves_even_when_its_block_fails() -> None:
    registry: ReaderRegistry[Subscription] = ReaderRegistry(Subscription)
    try:
        with registry.subscribe("k") as reader:
            assert isinstance(reader, Subscription) and len(registry) == 1
            raise RuntimeError("the client went away")
    except RuntimeError:
        pass
    assert len(registry) == 0
    registry.wake("k")  # nobody left: nothing to wake, no error


async def test_a_confirm_waits_for_its_own_operation_only_and_leaves_when_done() -> None:
    waiters = OutcomeWaiters(redis=None)  # type: ignore[arg-type]  # never started: woken directly
    mine = asyncio.create_task(waiters.wait("op_1", timeout=30))
    other = asyncio.create_task(waiters.wait("op_2", timeout=30))
    while len(waiters._waiting) < 2:
        await asyncio.sleep(0)
    waiters.wake("op_1")
    assert await mine is True and not other.done()
    assert waiters._waiting.of("op_1") == () and len(waiters._waiting) == 1
    assert await waiters.wait("op_3", timeout=0) is False  # its budget spent: not woken
    other.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await other
    assert len(waiters._waiting) == 0  # no key kept, even for a cancelled wait
