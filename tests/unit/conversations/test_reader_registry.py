"""`ReaderRegistry`, the one shape of the ledger's conversation waiters and the inbox's streams:
readers are woken by their key only, all at once when the process stops, and a key leaves the
registry with its last reader."""

from __future__ import annotations

import asyncio

from frontdoor_conversations.readers import ReaderRegistry
from frontdoor_conversations.wakeups import Subscription


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
