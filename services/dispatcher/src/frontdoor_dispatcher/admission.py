"""Which of a batch's attempts a worker process takes on, and handing the others back.

A process runs at most ``per_endpoint`` attempts to any one endpoint at once, and holds at
most ``per_endpoint_waiting`` more of that endpoint's messages (not claimed yet) to start
as those end, and at most ``total`` attempts in all, running or waiting. So one tenant's
dead endpoint (every attempt waits for the timeout) cannot take the process's capacity
from the other tenants. A message beyond any cap is not taken on and nothing waits for
room: it is handed back (`hand_back`: due again a little later, no attempt used) and the
relay offers it again. The Celery task never blocks (attempts run on the process's loop).
The short per-endpoint wait line spares a busy but healthy endpoint a hand-back (and a
new Celery task) for every message beyond the running cap.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import asyncpg
from frontdoor_core.clock import Clock
from frontdoor_webhooks.delivery import hand_back

__all__ = ["MAX_IN_FLIGHT", "PER_ENDPOINT", "PER_ENDPOINT_WAITING", "Admitted", "InFlight", "start_attempts"]

MAX_IN_FLIGHT: Final = 500
PER_ENDPOINT: Final = 16
PER_ENDPOINT_WAITING: Final = 64

Attempt = Callable[[str, str], Coroutine[Any, Any, None]]


@dataclass
class InFlight:
    """One process's running attempts (touched only from its event loop)."""

    total: int = MAX_IN_FLIGHT
    per_endpoint: int = PER_ENDPOINT
    per_endpoint_waiting: int = PER_ENDPOINT_WAITING
    taken: int = 0
    by_endpoint: Counter[str] = field(default_factory=Counter)
    running_by_endpoint: Counter[str] = field(default_factory=Counter)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _gates: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def take(self, endpoint_id: str) -> bool:
        """Take on one attempt to ``endpoint_id`` (running or waiting); False when a cap is reached."""
        if self.taken >= self.total or self.by_endpoint[endpoint_id] >= self.per_endpoint + self.per_endpoint_waiting:
            return False
        self.taken += 1
        self.by_endpoint[endpoint_id] += 1
        if endpoint_id not in self._gates:
            self._gates[endpoint_id] = asyncio.Semaphore(self.per_endpoint)
        return True

    def give_back(self, endpoint_id: str) -> None:
        """Release what `take` reserved."""
        self.taken -= 1
        self.by_endpoint[endpoint_id] -= 1
        if self.by_endpoint[endpoint_id] <= 0:
            del self.by_endpoint[endpoint_id]
            del self._gates[endpoint_id]

    async def run(self, endpoint_id: str, attempt: Coroutine[Any, Any, None]) -> None:
        """Run ``attempt`` once fewer than ``per_endpoint`` run to its endpoint."""
        gate = self._gates[endpoint_id]
        try:
            await gate.acquire()
        except BaseException:  # cancelled while waiting (shutdown): the attempt never starts
            attempt.close()
            raise
        try:
            self.running_by_endpoint[endpoint_id] += 1
            try:
                await attempt
            finally:
                self.running_by_endpoint[endpoint_id] -= 1
                if self.running_by_endpoint[endpoint_id] <= 0:
                    del self.running_by_endpoint[endpoint_id]
        finally:
            gate.release()


def _release(in_flight: InFlight, endpoint_id: str, _task: asyncio.Task[None]) -> None:
    in_flight.give_back(endpoint_id)


@dataclass(frozen=True)
class Admitted:
    """What `start_attempts` did with a batch: taken on (started, or waiting for its endpoint), handed back."""

    started: list[str]
    handed_back: list[str]


async def start_attempts(pool: asyncpg.Pool, message_ids: Sequence[str], in_flight: InFlight, attempt: Attempt, *,
                         clock: Clock, hand_back_within: float) -> Admitted:
    """Take on ``attempt(message_id, purpose)`` for each message there is room for; hand the rest back.

    Taken attempts run on the loop (at most ``per_endpoint`` at a time to one endpoint),
    not waited for. IDs of messages that no longer exist are dropped.

    Args:
        hand_back_within: A handed-back message is due again within ``1 +`` this many
            seconds (the delivery timeout: by then the endpoint's running attempts ended).
    """
    # One look-up for the whole batch (not one per message): engine and endpoint of each.
    rows = await pool.fetch("SELECT id, purpose, endpoint_id FROM webhook_messages WHERE id = ANY($1::text[])",
                            list(message_ids))
    found = {r["id"]: (r["purpose"], r["endpoint_id"]) for r in rows}
    started: list[str] = []
    refused: list[str] = []
    for message_id in dict.fromkeys(message_ids):
        if message_id not in found:
            continue
        purpose, endpoint_id = found[message_id]
        if not in_flight.take(endpoint_id):
            refused.append(message_id)
            continue
        task: asyncio.Task[None] = asyncio.create_task(in_flight.run(endpoint_id, attempt(message_id, purpose)))
        in_flight.tasks.add(task)
        task.add_done_callback(in_flight.tasks.discard)
        task.add_done_callback(functools.partial(_release, in_flight, endpoint_id))
        started.append(message_id)
    if refused:
        async with pool.acquire() as conn:
            await hand_back(conn, refused, clock(), hand_back_within)
    return Admitted(started=started, handed_back=refused)
