"""The process was told to stop: long-lived responses end now, so a deploy is not held by them.

On SIGTERM granian (like uvicorn) stops accepting connections, then waits for every open
response to finish before it runs the ASGI lifespan's shutdown. An event stream open for
minutes, or a long poll, therefore holds the process (and a rolling restart) until it ends
by itself or the orchestrator's grace period runs out and the process is killed. The
lifespan hears of the shutdown too late to help.

`ShutdownNotice` hears of it at once: the first long-lived response of the process chains a
handler onto the server's own SIGTERM/SIGINT handler (which keeps working: the previous
handler is called, and a handler installed with ``loop.add_signal_handler`` still gets the
signal through the loop's wake-up file descriptor). When the signal comes, every subscribed
`asyncio.Event` is set on its own loop; a stream then sends its last frame and ends, and its
client reconnects to a process that is not stopping (an agent with ``Last-Event-ID``, the
dashboard's EventSource by itself). Nothing is installed where no server handles the signal
(``SIG_DFL``: the process simply dies) or outside the main thread (signals cannot be
hooked there; streams then end as before, at their lifetime).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

import structlog

__all__ = ["ShutdownNotice", "shutdown_notice"]

_log = structlog.get_logger("frontdoor.http")
_Handler = Callable[[int, FrameType | None], Any]


class ShutdownNotice:
    """Wakes long-lived responses when the process receives one of ``signals``.

    Args:
        signals: The signals that mean "stop" (SIGTERM from an orchestrator, SIGINT from a terminal).
    """

    def __init__(self, signals: Sequence[int] = (signal.SIGTERM, signal.SIGINT)) -> None:
        self._signals = tuple(signals)
        self._previous: dict[int, _Handler] = {}
        self._events: dict[asyncio.Event, asyncio.AbstractEventLoop] = {}
        self._begun = False
        self._warned = False

    @property
    def begun(self) -> bool:
        """The process was told to stop (it stays so)."""
        return self._begun

    @property
    def subscribers(self) -> int:
        return len(self._events)

    def begin(self) -> None:
        """Wake every subscriber. Idempotent; safe from a signal handler or another thread."""
        self._begun = True
        for event, loop in list(self._events.items()):
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits on it
                loop.call_soon_threadsafe(event.set)

    @contextlib.contextmanager
    def wakes(self, event: asyncio.Event) -> Iterator[None]:
        """Set ``event`` (on the running loop) when the notice comes, at once if it came already,
        for as long as the block runs. Hooks the signals first if they are not hooked yet."""
        self.install()
        self._events[event] = asyncio.get_running_loop()
        if self._begun:
            event.set()
        try:
            yield
        finally:
            self._events.pop(event, None)

    def install(self) -> bool:
        """Chain the handler onto each signal's current one; answer whether every signal is hooked.

        Called again after a server replaced the handler (uvicorn restores its own when it
        stops), it chains onto the new one; never twice onto itself.
        """
        if threading.current_thread() is not threading.main_thread():
            if not self._warned:
                self._warned = True
                _log.warning("shutdown_notice.not_main_thread")
            return False
        hooked = True
        for signum in self._signals:
            current = signal.getsignal(signum)
            if current == self._on_signal:
                continue
            if not callable(current):  # SIG_DFL, SIG_IGN, or a handler not set from Python
                hooked = False
                continue
            self._previous[signum] = current
            signal.signal(signum, self._on_signal)
        return hooked

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self._begun and self._events:  # logged from the loop: a signal handler must not take logging's locks
            loop = next(iter(self._events.values()))
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: _log.info("shutdown_notice.received", streams=len(self._events),
                                                            signal=signal.Signals(signum).name))
        self.begin()
        previous = self._previous.get(signum)
        if previous is not None:
            previous(signum, frame)


shutdown_notice = ShutdownNotice()
"""The process's notice (SIGTERM, SIGINT), shared by every app in it."""
