"""`ShutdownNotice`: a stop signal wakes the subscribed streams at once and still reaches the
server's own handler (a Python handler, or one installed with ``loop.add_signal_handler``).
Real signals to this process, on SIGUSR1/SIGUSR2 so that nothing else hears them."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from frontdoor_httpkit import ShutdownNotice


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


async def _woken(event: asyncio.Event) -> None:
    async with asyncio.timeout(10):
        await event.wait()


async def test_the_signal_wakes_subscribers_and_the_servers_handler(restore_signals: None) -> None:
    seen: list[int] = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))  # the server's handler
    notice = ShutdownNotice((signal.SIGUSR1,))
    first, later = asyncio.Event(), asyncio.Event()
    with notice.wakes(first):
        assert notice.subscribers == 1 and not notice.begun
        assert notice.install() and signal.getsignal(signal.SIGUSR1) == notice._on_signal  # never twice
        os.kill(os.getpid(), signal.SIGUSR1)
        await _woken(first)
    assert notice.begun and seen == [signal.SIGUSR1] and notice.subscribers == 0
    with notice.wakes(later):  # after the notice, a new subscriber is told at once
        assert later.is_set()


async def test_a_loop_signal_handler_still_runs(restore_signals: None) -> None:
    loop = asyncio.get_running_loop()
    served = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR2, served.set)  # as granian and uvicorn install theirs
    try:
        notice = ShutdownNotice((signal.SIGUSR2,))
        woken = asyncio.Event()
        with notice.wakes(woken):
            os.kill(os.getpid(), signal.SIGUSR2)
            await _woken(woken)
            await _woken(served)  # through the loop's wake-up fd, though the Python handler is ours
    finally:
        loop.remove_signal_handler(signal.SIGUSR2)


async def test_nothing_is_hooked_without_a_server_handler_or_off_the_main_thread(restore_signals: None) -> None:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # the signal would end the process: leave it so
    notice = ShutdownNotice((signal.SIGUSR1,))
    assert notice.install() is False
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(notice.install()))
    thread.start()
    thread.join()
    assert answers == [False] and signal.getsignal(signal.SIGUSR1) != notice._on_signal


async def test_begin_from_another_thread_wakes_the_loop() -> None:
    notice = ShutdownNotice(())
    woken = asyncio.Event()
    with notice.wakes(woken):
        thread = threading.Thread(target=notice.begin)
        thread.start()
        await _woken(woken)
        thread.join()
