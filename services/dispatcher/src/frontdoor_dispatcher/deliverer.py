"""The deliverer: one asyncio process per dispatcher replica, PostgreSQL its only queue.

``python -m frontdoor_dispatcher.deliverer`` (settings from the environment) runs:

1. ``LISTEN frontdoor_webhooks``: the transaction that writes a message announces it
   (``pg_notify`` commits with it), so the deliverer wakes at once; otherwise it sleeps
   until the next retry is due (at most ``IDLE_WAKE`` seconds: the backstop for a lost
   notification). Beside it the `EventForwarder` turns the sessions and tenancy outboxes
   into webhook messages (``LISTEN frontdoor_events``).
2. Each pass claims due messages straight from PostgreSQL (`claim_due`: ``FOR UPDATE
   SKIP LOCKED`` and the delivery lease, in one short transaction), as many as its
   shares have room for (`Lanes`: per endpoint, per tenant, in all), and starts an attempt
   at each on this loop: the engine's `deliver` (or `perform_message` for a perform
   message, `relay_message` for a conversation relay) with the claim already taken, keep-alive connections per endpoint origin
   (`DeliveryClient`: `SafeFetcher.post`'s rules on a lean HTTP/1.1 client), the
   endpoint's secrets from a short cache (`SecretCache`) and clean ``2xx`` answers
   recorded in batches (`DeliveredBatch`).
3. At most ``PER_ENDPOINT`` attempts run to one endpoint at once (a semaphore each, held
   from the attempt's start until its POST is answered; recording it holds neither the
   permit nor the endpoint's share of the claims, `Lanes`); a
   claim waiting for its endpoint's turn has its lease renewed before it is sent if less
   than a whole attempt is left of it, so no lease ends while its message is being sent.
   Each attempt's POST goes over its tenant's own connections (`partitioned`): one tenant
   takes at most ``max_connections`` of a shared webhook host's, never all of them.

Several deliverers (replicas) take different rows; the ledger's fast path claims its
perform message the same way (and a conversation relay when it writes it), so one process
sends a given attempt. A deliverer killed
with SIGKILL loses nothing: its claims' leases end and the messages are claimed again.
On SIGTERM it stops claiming, lets running attempts end (bounded by the webhook
timeout) and hands back the claims it had not started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

import asyncpg
import structlog
import uvloop
from frontdoor_conversations import publish_changed
from frontdoor_conversations.relay_delivery import relay_message
from frontdoor_conversations.relay_endpoints import queue_stranded_relays
from frontdoor_core.clock import Clock, utc_now
from frontdoor_core.db import create_pool
from frontdoor_core.settings import Settings
from frontdoor_operations.perform import perform_message
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.claims import Candidate, claim_due, extend_lease, release_claims
from frontdoor_webhooks.delivered_batch import DeliveredBatch
from frontdoor_webhooks.delivery import ClaimedMessage, Throttle, deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.messages import NOTIFY_CHANNEL
from frontdoor_webhooks.rate_windows import PgThrottle
from frontdoor_webhooks.sender import Sender, SenderResponse, partitioned

from .deliverer_metrics import CLAIM_DELAY, HELD
from .lanes import Lanes
from .secret_cache import SecretCache

__all__ = ["BATCH", "IDLE_WAKE", "Deliverer"]

_log = structlog.get_logger("frontdoor.deliverer")
BATCH: Final = 256
IDLE_WAKE: Final = 1.0
TICK: Final = 0.01
"""Least time between two passes that found less than a full batch: claims come in batches.

Not for an endpoint with a backlog (`Lanes.hungry`): it is claimed for as soon as half its
share is free, so its permits are never idle waiting out the pace."""
NEWEST_EVERY: Final = 0.25
"""Without a NOTIFY, the newest end of the due index is looked at no more often than this."""
DUE_CHECK_EVERY: Final = 0.2
"""While claims are held, the next retry's time is read no more often than this."""
LEASE_SLACK: Final = timedelta(seconds=1)
CLAIM_PLANNER: Final = {"enable_bitmapscan": "off", "enable_seqscan": "off"}
"""The claiming connection's planner: the due index walked in order, whatever the statistics say.

It runs only the claim (`claim_due`) and the next-due look-up. When a backlog forms faster
than autovacuum re-analyses ``webhook_messages`` (the statistics still say few rows are
pending), the planner otherwise picks a bitmap scan of every due row and a sort: measured at
26 ms a pass against 0.1 ms for the ordered walk, with 60,000 due (bench/README.md).
"""


class _Turn:
    """An attempt's turn at its endpoint: one of its ``PER_ENDPOINT`` permits, and its place in its share."""

    __slots__ = ("answered", "endpoint_id", "gate", "held", "lanes", "wake")

    def __init__(self, lanes: Lanes, endpoint_id: str, wake: asyncio.Event) -> None:
        self.lanes = lanes
        self.endpoint_id = endpoint_id
        self.gate = lanes.gate(endpoint_id)
        self.wake = wake
        self.held = False
        self.answered = False

    def end(self) -> None:
        """Give the permit back (the POST was answered, failed, or never ran)."""
        if self.held:
            self.held = False
            self.gate.release()

    def answer(self) -> None:
        """The POST was answered or failed: the permit and the endpoint's share are free for the next claim."""
        self.end()
        if not self.answered:
            self.answered = True
            self.lanes.answered(self.endpoint_id)
            self.wake.set()  # the endpoint has room: the next pass may claim for it


class _TurnSender:
    """The attempt's sender: its endpoint's turn ends as soon as the POST is answered (or fails).

    What follows (recording the attempt, which for a delivery waits for its batch) takes
    neither one of the endpoint's permits nor its share (`Lanes.answered`), so the next
    claim's POST starts at once and the next pass claims for the endpoint while earlier
    answers are being written.
    """

    __slots__ = ("_inner", "_turn")

    def __init__(self, inner: Sender, turn: _Turn) -> None:
        self._inner = inner
        self._turn = turn

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:  # noqa: ASYNC109
        try:
            return await self._inner.post(url, body, headers, timeout)
        finally:
            self._turn.answer()


class Deliverer:
    """Claims due messages and attempts them until `stop`.

    Args:
        pool: Connections for attempts (the claims use the listening connection).
        sender: The transport (`SafeSender` over a `DeliveryClient` in production).
        redis: Announces perform outcomes on the ledger's settled channel (best effort;
            None: not announced, a waiting confirm re-reads when its wait ends).
    """

    def __init__(self, database_url: str, pool: asyncpg.Pool, *, sender: Sender, kek: Kek, policy: DeliveryPolicy,
                 clock: Clock = utc_now, redis: Any = None, lanes: Lanes | None = None, batch: int = BATCH,
                 idle_wake: float = IDLE_WAKE, heartbeat: Path | None = None,
                 throttle: Throttle | None = None) -> None:
        self._database_url = database_url
        self._pool = pool
        self._sender = sender
        self._kek = kek
        self._policy = policy
        self._clock = clock
        self._redis = redis
        self.lanes = lanes or Lanes()
        self._batch = max(batch, 1)
        self._idle_wake = idle_wake
        self._heartbeat = heartbeat
        self._beat_at = 0.0
        self._throttle = throttle or PgThrottle(pool)
        self._secrets = SecretCache(kek)
        self._delivered = DeliveredBatch(pool)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._unstarted: list[ClaimedMessage] = []
        self._news = True
        self._newest_at = 0.0
        self._due_check_at = 0.0
        self.attempted = 0

    def stop(self) -> None:
        """Stop claiming; `run` returns once running attempts have ended."""
        self._stopping.set()
        self._wake.set()

    def _notified(self, *_: Any) -> None:
        self._news = True
        self._wake.set()

    def _beat(self) -> None:
        """Touch the heartbeat file (at most every 5 s): the container's healthcheck reads its age."""
        if self._heartbeat is not None and time.monotonic() - self._beat_at > 5.0:
            self._beat_at = time.monotonic()
            with contextlib.suppress(OSError):
                self._heartbeat.touch()

    async def _pass(self, conn: asyncpg.Connection, news: bool) -> bool:
        """Claim and start what there is room for; True when a full batch came (more may be due).

        ``news``: a NOTIFY came since the last pass (a new message may wait behind a backlog).
        """
        lanes = self.lanes
        limit = min(lanes.room, self._batch)
        if limit <= 0:
            return False
        now = self._clock()
        full_endpoints, full_tenants = lanes.full_endpoints(), lanes.full_tenants()
        rooms = lanes.endpoint_rooms()
        claims, found = await claim_due(conn, now, self._policy.lease, limit=limit, choose=lanes.choose,
                                        exclude_endpoints=full_endpoints, exclude_tenants=full_tenants,
                                        unclaimed=self._unclaimed, rooms=rooms, room=lanes.endpoint_share)
        lanes.claimed(rooms, lanes.endpoint_share, Counter(c.endpoint_id for c, _ in claims))
        shares_full = bool(full_endpoints or full_tenants or lanes.full_endpoints())
        if found < limit and shares_full and (news or time.monotonic() - self._newest_at >= NEWEST_EVERY):
            # A backlog at its share fills the oldest end of the due index: look at the newest too.
            self._newest_at = time.monotonic()
            more, _ = await claim_due(conn, now, self._policy.lease, limit=min(lanes.room, self._batch),
                                      choose=lanes.choose, exclude_endpoints=lanes.full_endpoints(),
                                      exclude_tenants=lanes.full_tenants(), order="newest",
                                      unclaimed=self._unclaimed, rooms=lanes.endpoint_rooms(),
                                      room=lanes.endpoint_share)
            claims += more
        for claimed, due_at in claims:
            self._start(claimed, due_at, now)
        HELD.set(lanes.held)
        return found >= limit and len(claims) > 0

    def _unclaimed(self, candidate: Candidate) -> None:
        """A chosen row the lease did not take (its endpoint went away): no longer held."""
        self.lanes.release(candidate.tenant_id, candidate.endpoint_id)

    def _start(self, claimed: ClaimedMessage, due_at: datetime, now: datetime) -> None:
        CLAIM_DELAY.observe(max((now - due_at).total_seconds(), 0.0))
        task = asyncio.create_task(self._attempt(claimed))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, claimed: ClaimedMessage) -> None:
        lanes = self.lanes
        turn = _Turn(lanes, claimed.endpoint_id, self._wake)
        try:
            await turn.gate.acquire()
            turn.held = True
            if self._stopping.is_set():
                self._unstarted.append(claimed)
                return
            now = self._clock()
            if claimed.locked_until - now < self._policy.timeout + LEASE_SLACK:
                async with self._pool.acquire() as conn:
                    renewed = await extend_lease(conn, claimed, now, self._policy.lease)
                if renewed is None:
                    return  # the lease ended and another process took the message
                claimed = renewed
            await self._send(claimed, _TurnSender(partitioned(self._sender, claimed.tenant_id), turn))
        except Exception as exc:  # the lease ends and the message is claimed again
            _log.error("webhook_delivery_error", message_id=claimed.id, error=type(exc).__name__)
        finally:
            turn.end()
            lanes.release(claimed.tenant_id, claimed.endpoint_id, answered=turn.answered)
            self.attempted += 1
            self._wake.set()

    async def _send(self, claimed: ClaimedMessage, sender: Sender) -> None:
        if claimed.purpose == "relay":  # a conversation relay whose ledger did not settle it (crashed)
            await relay_message(self._pool, self._redis, claimed, sender=sender, kek=self._kek, clock=self._clock,
                                policy=self._policy, throttle=self._throttle, secrets=self._secrets)
            return  # a relay that disables its endpoint queues the endpoint's waiting relays itself
        if claimed.purpose == "perform":
            report = await perform_message(self._pool, self._redis, claimed.id, sender=sender, kek=self._kek,
                                           clock=self._clock, policy=self._policy, throttle=self._throttle,
                                           claimed=claimed, secrets=self._secrets)
        else:
            report = await deliver(self._pool, claimed.id, sender=sender, kek=self._kek, clock=self._clock,
                                   policy=self._policy, throttle=self._throttle, claimed=claimed,
                                   secrets=self._secrets, delivered=self._delivered)
        if report is not None and report.endpoint_disabled:
            await self._queue_stranded_relays(claimed.tenant_id, claimed.endpoint_id)

    async def _queue_stranded_relays(self, tenant_id: str, endpoint_id: str) -> None:
        """This attempt disabled the endpoint: the conversations of its waiting relays go to a person.

        Just after the attempt's commit, not in it (deliveries stay one statement when they
        succeed); should this process die in between, those relays wait for the endpoint.
        """
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                changed = await queue_stranded_relays(conn, tenant_id, endpoint_id, now=self._clock())
        except Exception as exc:
            _log.error("conversation_relays_not_queued", endpoint_id=endpoint_id, error=type(exc).__name__)
            return
        for cid in changed:
            if self._redis is not None:
                await publish_changed(self._redis, tenant_id, cid)

    async def _next_due_in(self, conn: asyncpg.Connection) -> float:
        seconds = await conn.fetchval(
            "SELECT extract(epoch FROM (min(next_attempt_at) - now())) FROM webhook_messages"
            " WHERE state = 'pending' AND NOT parked AND next_attempt_at > now()")
        return self._idle_wake if seconds is None else max(0.0, min(float(seconds), self._idle_wake))

    async def _loop(self, conn: asyncpg.Connection) -> None:
        await conn.add_listener(NOTIFY_CHANNEL, self._notified)
        last = 0.0
        while not self._stopping.is_set():
            self._beat()
            # Cleared before the pause: a wake-up during it (`stop` included) is not lost.
            self._wake.clear()
            pause = last + TICK - time.monotonic()
            if pause > 0 and not self.lanes.hungry():
                with contextlib.suppress(TimeoutError):  # a stop ends the pause at once
                    await asyncio.wait_for(self._stopping.wait(), timeout=pause)
            if self._stopping.is_set():
                break
            news, self._news = self._news, False
            last = time.monotonic()
            if await self._pass(conn, news):
                last = 0.0  # a full batch: go again at once
                continue
            if self.lanes.held and time.monotonic() < self._due_check_at:
                timeout = DUE_CHECK_EVERY  # busy: each ending attempt wakes the loop anyway
            else:
                timeout = await self._next_due_in(conn)
                self._due_check_at = time.monotonic() + DUE_CHECK_EVERY
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)

    async def run(self) -> None:
        """Deliver until `stop`; reconnects after a PostgreSQL outage; then drains."""
        while not self._stopping.is_set():
            try:
                conn = await asyncpg.connect(self._database_url, server_settings=CLAIM_PLANNER)
            except (OSError, asyncpg.PostgresError):
                _log.warning("deliverer_db_unavailable")
                await asyncio.sleep(1.0)
                continue
            try:
                await self._loop(conn)
            except Exception as exc:  # any failure of the connection (asyncpg's
                # InternalClientError after an outage included): a new connection, never a dead process
                _log.warning("deliverer_db_connection_lost", error=type(exc).__name__)
                await asyncio.sleep(0.5)
            finally:
                # A connection the server cut may fail to close (BrokenPipeError): never let
                # that end the deliverer; drop it and connect again.
                try:
                    if not conn.is_closed():
                        await asyncio.wait_for(conn.close(), 5)
                except Exception:
                    conn.terminate()
        await self._drain()

    async def _drain(self) -> None:
        """Let running attempts end (bounded), then hand back the claims never started."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self._policy.timeout.total_seconds() + 2)
        for task in list(self._tasks):
            task.cancel()
        if self._unstarted:
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                async with self._pool.acquire() as conn:
                    await release_claims(conn, self._unstarted)
            self._unstarted.clear()


def _tracing(settings: Settings) -> None:
    """The tracer provider and instrumentations, when an OTLP endpoint is set (else they record nothing)."""
    if settings.otel_exporter_otlp_endpoint:
        from frontdoor_core.telemetry import configure_tracing

        configure_tracing("frontdoor-deliverer", otlp_endpoint=settings.otel_exporter_otlp_endpoint)


def main(settings: Settings | None = None) -> None:
    """Run the deliverer (and the event forwarder) in the foreground until SIGTERM or SIGINT."""
    from frontdoor_core.dev_mode import warn_if_dev_mode
    from frontdoor_core.logging import configure_logging
    from frontdoor_core.metrics import metrics_listener
    from frontdoor_core.redis_client import create_redis
    from frontdoor_webhooks.delivery_client import DeliveryClient
    from frontdoor_webhooks.sender import SafeSender

    from .deliverer_metrics import sample_backlog
    from .event_forwarder import EventForwarder
    from .settings import load
    from .worker_runtime import delivery_outbound_policy

    s = settings or load()
    configure_logging(level=s.log_level, fmt=s.log_format)
    warn_if_dev_mode(s, "deliverer", os.environ)
    _tracing(s)

    async def go() -> None:
        pool = await create_pool(s.database_url, min_size=2, max_size=s.db_pool_max)
        fetcher = DeliveryClient(delivery_outbound_policy(s), max_connections=32)
        redis = create_redis(s.redis_url, cluster=s.redis_cluster) if s.redis_url else None
        deliverer = Deliverer(s.database_url, pool, sender=SafeSender(fetcher), kek=Kek.from_env_value(s.kek),
                              policy=DeliveryPolicy.from_settings(s), redis=redis,
                              heartbeat=Path(s.data_dir) / "deliverer-heartbeat")
        forwarder = EventForwarder(s.database_url)  # the sessions and tenancy outboxes -> webhook messages

        def stop() -> None:
            deliverer.stop()
            forwarder.stop()

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        try:
            async with metrics_listener(s.metrics_port, samplers=[lambda: sample_backlog(pool, utc_now())]):
                _log.info("deliverer_started")
                await asyncio.gather(deliverer.run(), forwarder.run())
                _log.info("deliverer_stopped", attempted=deliverer.attempted, forwarded=forwarder.forwarded)
        finally:
            await fetcher.aclose()
            if redis is not None:
                await redis.aclose()
            await pool.close()

    # uvloop, as granian's --loop auto gives the services: ~8 % less deliverer CPU per delivery
    # (bench/delivery_throughput.py, 3 alternating pairs, bench/README.md).
    uvloop.run(go())


if __name__ == "__main__":
    main()
