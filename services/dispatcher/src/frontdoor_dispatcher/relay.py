"""The outbox relay: moves due webhook messages to the Celery workers.

``python -m frontdoor_dispatcher.relay`` runs one loop:

1. ``LISTEN frontdoor_webhooks``: every new message is announced by the transaction that
   wrote it (``pg_notify`` commits with it), so the relay wakes at once: no fixed polling.
   Beside it runs the `EventForwarder`, which turns the sessions and tenancy outboxes into
   webhook messages (``LISTEN frontdoor_events``).
2. Find due messages with ``FOR UPDATE SKIP LOCKED`` (several relays running together
   take different rows), commit, then send them to Celery in batches
   (``frontdoor.webhooks.deliver``). Publishing happens after the commit and in a thread
   (Celery's ``apply_async`` blocks): a stalled broker neither holds row locks nor stops
   this loop. A message two relays both hand on is harmless: the delivery engine's claim
   lets one attempt through.
3. Sleep until the next notification or the next scheduled retry, whichever is first
   (at most ``IDLE_WAKE`` seconds, the backstop for a lost notification or a restart).

A message sent to Celery is not sent again by this relay while it waits to be claimed,
for up to ``RESEND_AFTER`` seconds (``FRONTDOOR_RELAY_RESEND_AFTER``); after that (the
task was lost: a Redis restart, a worker killed before claiming it) it is relayed again.
At most ``WINDOW`` messages are handed on and not yet claimed at any time, and at most
``PER_ENDPOINT`` of them to one endpoint: a backlog is fed to the workers as they take it
(the relay checks every ``IN_FLIGHT_POLL`` seconds while messages are in flight) instead
of being poured into the broker, so a new message waits behind at most its own endpoint's
share, not behind the whole backlog. The share matters most for a dead endpoint: its
messages wait in the workers' per-endpoint lines (`admission`) while its running attempts
time out, unclaimed, for many seconds; without the share they filled the whole window and
every other tenant's messages waited behind them (head-of-line blocking), up to
``RESEND_AFTER``. Messages of an endpoint that has its share are paged past, not handed on.
The delivery engine's claim makes a duplicate harmless, and PostgreSQL remains the record:
a Redis or relay restart loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import asyncpg
import structlog
from frontdoor_core.dev_mode import warn_if_dev_mode
from frontdoor_core.logging import configure_logging
from frontdoor_core.settings import Settings
from frontdoor_webhooks.delivery import due_messages_by_endpoint
from frontdoor_webhooks.messages import NOTIFY_CHANNEL

__all__ = ["Relay", "main"]

_log = structlog.get_logger("frontdoor.relay")
BATCH: Final = 50
RESEND_AFTER: Final = 30.0
IDLE_WAKE: Final = 1.0
WINDOW: Final = 480
PER_ENDPOINT: Final = 64
# Sized to what the workers take on at once: a process takes 16 running + 64 waiting per
# endpoint and 500 in all (`admission`); more than that unclaimed only makes them hand
# messages back (measured before the per-endpoint share, one endpoint: a window of 2000 →
# 264/s, 120 → 330/s). The window holds PER_ENDPOINT of WINDOW // PER_ENDPOINT = 7 dead
# endpoints at once and still has room for the others.
IN_FLIGHT_POLL: Final = 0.05
# Leaving out an endpoint at its share walks its due backlog in the due index (a 10,000
# message backlog: ~14 ms a query on the loaded 2-core machine). When such a query found
# nothing else, it is not repeated for this long unless a NOTIFY announces a new message;
# a retry of another endpoint coming due meanwhile waits at most this much longer.
SHARE_WALK_BACKOFF: Final = 0.25


class Relay:
    """The loop; ``send(batch)`` hands a batch of message IDs to the workers.

    ``send`` may be a coroutine function (awaited on this loop) or a plain, possibly
    blocking, function (run in a thread).
    """

    def __init__(self, database_url: str, send: Callable[[list[str]], Any], *, batch: int = BATCH,
                 idle_wake: float = IDLE_WAKE, heartbeat: Path | None = None, resend_after: float = RESEND_AFTER,
                 window: int = WINDOW, per_endpoint: int = PER_ENDPOINT) -> None:
        self._database_url = database_url
        self._send = send
        self._batch = batch
        self._idle_wake = idle_wake
        self._resend_after = resend_after
        self._broker_down = False
        self._window = max(window, batch)
        self._per_endpoint = max(per_endpoint, 1)
        self._wake = asyncio.Event()
        self._sent: dict[str, float] = {}  # handed on, not seen claimed: when
        self._endpoint_of: dict[str, str] = {}  # ... and the endpoint of each
        self._stopping = asyncio.Event()
        self._news = True  # a NOTIFY came since the last pass
        self._walk_idle_until = 0.0
        self._heartbeat = heartbeat
        self._beat_at = 0.0
        self.relayed = 0

    def _beat(self) -> None:
        """Touch the heartbeat file (at most every 5 s): the container's healthcheck reads its age."""
        if self._heartbeat is not None and time.monotonic() - self._beat_at > 5.0:
            self._beat_at = time.monotonic()
            with contextlib.suppress(OSError):
                self._heartbeat.touch()

    def stop(self) -> None:
        """Finish the current pass and return from :meth:`run`."""
        self._stopping.set()
        self._wake.set()

    def _notified(self, *_: Any) -> None:
        self._news = True
        self._wake.set()

    async def _forget_taken(self, conn: asyncpg.Connection, now_mono: float) -> None:
        """Keep in ``_sent`` only messages still waiting to be claimed, and not for too long."""
        if not self._sent:
            return
        rows = await conn.fetch(
            "SELECT id FROM webhook_messages WHERE id = ANY($1::text[]) AND state = 'pending'"
            " AND next_attempt_at <= $2 AND (locked_until IS NULL OR locked_until < $2)",
            list(self._sent), datetime.now(UTC))
        waiting = {r["id"] for r in rows}
        self._sent = {m: t for m, t in self._sent.items() if m in waiting and now_mono - t < self._resend_after}
        self._endpoint_of = {m: e for m, e in self._endpoint_of.items() if m in self._sent}

    def _share(self, found: list[tuple[str, str]], held: Counter[str]) -> list[str]:
        """The messages of ``found`` whose endpoint's share has room (``held`` counts what is out)."""
        taken = []
        for message_id, endpoint_id in found:
            if held[endpoint_id] < self._per_endpoint:
                held[endpoint_id] += 1
                self._endpoint_of[message_id] = endpoint_id
                taken.append(message_id)
        return taken

    async def _pass(self, conn: asyncpg.Connection) -> int:
        now_mono = time.monotonic()
        await self._forget_taken(conn, now_mono)
        moved = 0
        held = Counter(self._endpoint_of[m] for m in self._sent)
        news, self._news = self._news, False
        while (room := min(self._window - len(self._sent), self._batch * 4)) > 0:
            full = [e for e, n in held.items() if n >= self._per_endpoint]
            if full and not news and now_mono < self._walk_idle_until:
                break  # the same walk found nothing a moment ago and nothing new was announced
            async with conn.transaction():  # committed before publishing: no lock is held meanwhile
                found = await due_messages_by_endpoint(conn, datetime.now(UTC), limit=room, exclude=list(self._sent),
                                                       exclude_endpoints=full)
            # Past an endpoint's share its rows are let go (unlocked at the commit above): the
            # next query leaves that endpoint out, so a backlog of one endpoint takes one round.
            due = self._share(found, held)
            for start in range(0, len(due), self._batch):
                chunk = due[start:start + self._batch]
                try:
                    await self._publish(chunk)
                except Exception as exc:  # the broker is down: the messages stay due in PostgreSQL
                    _log.warning("relay_broker_unavailable", error=type(exc).__name__)
                    self._broker_down = True
                    self._endpoint_of = {m: e for m, e in self._endpoint_of.items() if m in self._sent}
                    return moved
                for m in chunk:
                    self._sent[m] = now_mono
                moved += len(chunk)
            if len(found) < room:  # nothing more is due
                if full and not due:
                    self._walk_idle_until = time.monotonic() + SHARE_WALK_BACKOFF
                break
        return moved

    async def _publish(self, chunk: list[str]) -> None:
        if inspect.iscoroutinefunction(self._send):
            await self._send(chunk)
        else:
            await asyncio.to_thread(self._send, chunk)

    async def _next_due_in(self, conn: asyncpg.Connection) -> float:
        seconds = await conn.fetchval(
            "SELECT extract(epoch FROM (min(next_attempt_at) - now())) FROM webhook_messages"
            " WHERE state = 'pending' AND NOT parked AND next_attempt_at > now()")
        return self._idle_wake if seconds is None else max(0.0, min(float(seconds), self._idle_wake))

    async def run(self) -> None:
        """Relay until :meth:`stop`; reconnects after a PostgreSQL outage."""
        while not self._stopping.is_set():
            try:
                conn = await asyncpg.connect(self._database_url)
            except (OSError, asyncpg.PostgresError):
                _log.warning("relay_db_unavailable")
                await asyncio.sleep(1.0)
                continue
            try:
                await conn.add_listener(NOTIFY_CHANNEL, self._notified)
                while not self._stopping.is_set():
                    self._wake.clear()
                    self._beat()
                    moved = await self._pass(conn)
                    self.relayed += moved
                    if self._broker_down:  # try again shortly (the notifications meanwhile are moot)
                        self._broker_down = False
                        await asyncio.sleep(1.0)
                        continue
                    if moved:
                        continue
                    timeout = await self._next_due_in(conn)
                    if self._sent:  # handed on, not claimed yet: look again soon to refill the window
                        timeout = min(timeout, IN_FLIGHT_POLL)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                _log.warning("relay_db_connection_lost")
                await asyncio.sleep(0.5)
            finally:
                if not conn.is_closed():
                    await conn.close()


def celery_sender() -> Callable[[list[str]], Any]:
    """Send batches with the Celery app (imported here: the app reads settings at import)."""
    from .tasks.webhooks import deliver

    def send(batch: Sequence[str]) -> None:
        deliver.apply_async(args=[list(batch)])

    return send


def main(settings: Settings | None = None) -> None:
    """Run the relay in the foreground until SIGTERM or SIGINT."""
    from .settings import load

    s = settings or load()
    configure_logging(level=s.log_level, fmt=s.log_format)
    warn_if_dev_mode(s, "relay", os.environ)
    resend_after = float(os.environ.get("FRONTDOOR_RELAY_RESEND_AFTER", RESEND_AFTER))
    relay = Relay(s.database_url, celery_sender(), heartbeat=Path(s.data_dir) / "relay-heartbeat",
                  resend_after=resend_after)

    from .event_forwarder import EventForwarder

    forwarder = EventForwarder(s.database_url)  # the sessions and tenancy outboxes -> webhook messages

    def stop() -> None:
        relay.stop()
        forwarder.stop()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        _log.info("relay_started")
        await asyncio.gather(relay.run(), forwarder.run())
        _log.info("relay_stopped", relayed=relay.relayed, forwarded=forwarder.forwarded)

    asyncio.run(go())


if __name__ == "__main__":
    main()
