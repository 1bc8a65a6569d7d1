"""`ChannelListener`, the one Redis pub/sub subscription per process behind the wake-up hubs
(a waiting confirm's outcome, a conversation's readers): payloads reach the callback, a lost
subscription is taken up again, and stop ends the background task."""

from __future__ import annotations

import asyncio
import secrets

import redis.asyncio as aioredis
import structlog
from frontdoor_core.channel_listener import ChannelListener
from frontdoor_core.runtime import Runtime


async def _publish_until_heard(runtime: Runtime, channel: str, payload: bytes, heard: asyncio.Queue[object]) -> object:
    async with asyncio.timeout(10):
        while True:  # the subscription starts in the background: publish until it listens
            await runtime.redis.publish(channel, payload)
            try:
                return await asyncio.wait_for(heard.get(), 0.2)
            except TimeoutError:
                continue


async def test_payloads_reach_the_callback_across_a_lost_subscription_until_stopped(runtime: Runtime) -> None:
    channel = f"test:channel-listener:{secrets.token_hex(4)}"
    heard: asyncio.Queue[object] = asyncio.Queue()
    name = f"listener-{secrets.token_hex(4)}"
    own = aioredis.Redis.from_url(runtime.settings.redis_url, client_name=name)
    listener = ChannelListener(own, channel, heard.put_nowait, name="test-listener",
                               log=structlog.get_logger("test"), retry_event="test.listener_retry")
    await listener.start()
    try:
        assert await _publish_until_heard(runtime, channel, b"op_1", heard) == b"op_1"
        ours = [c["id"] for c in await runtime.redis.client_list(_type="pubsub") if c.get("name") == name]
        assert ours
        for client_id in ours:  # only this listener's subscription: the Redis connection is lost
            await runtime.redis.client_kill_filter(_id=client_id)
        assert await _publish_until_heard(runtime, channel, b"op_2", heard) == b"op_2"
    finally:
        await listener.stop()
        await own.aclose()
    while not heard.empty():
        heard.get_nowait()
    await runtime.redis.publish(channel, b"op_3")
    await asyncio.sleep(0.3)
    assert heard.empty()


class _StubbornPubSub:
    """A subscription whose read ignores the first cancellation (a driver stuck mid-read)."""

    def __init__(self) -> None:
        self.ignored = 0

    async def subscribe(self, channel: str) -> None:
        return None

    async def get_message(self, timeout: float) -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.ignored += 1
                if self.ignored > 1:
                    raise

    async def aclose(self) -> None:
        return None


class _StubbornRedis:
    def __init__(self) -> None:
        self.pubsub_made = _StubbornPubSub()

    def pubsub(self, **_: object) -> _StubbornPubSub:
        return self.pubsub_made


async def test_stop_never_hangs_on_a_subscription_that_ignores_its_cancellation(monkeypatch: object) -> None:
    from frontdoor_core import channel_listener

    monkeypatch.setattr(channel_listener, "STOP_TIMEOUT_S", 0.2)  # type: ignore[attr-defined]
    stub = _StubbornRedis()
    listener = ChannelListener(stub, "test:stubborn", lambda _: None, name="stubborn",  # type: ignore[arg-type]
                               log=structlog.get_logger("test"), retry_event="test.listener_retry")
    await listener.start()
    await asyncio.sleep(0.05)  # it is reading now
    task = listener._task
    assert task is not None
    async with asyncio.timeout(5):
        await listener.stop()  # returns after the bounded wait, not never
    assert stub.pubsub_made.ignored == 1 and not task.done()
    task.cancel()  # the stuck read gives up on the second cancellation
    await asyncio.wait({task}, timeout=5)
    assert task.done()


async def test_a_runtime_closes_even_with_a_connection_never_released(runtime: Runtime, monkeypatch: object) -> None:
    from frontdoor_core import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "CLOSE_TIMEOUT_S", 0.3)  # type: ignore[attr-defined]
    own = await Runtime.open(runtime.settings)
    await own.pool.acquire()  # never released: a graceful pool.close() would wait for it forever
    async with asyncio.timeout(10):  # without the bounded close this times out
        await own.close()
    assert own.pool.is_closing()
