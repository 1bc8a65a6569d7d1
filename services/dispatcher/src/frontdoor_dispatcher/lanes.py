"""The deliverer's shares: how much of its capacity one endpoint and one tenant may hold.

A deliverer holds at most ``total`` claimed messages at once (waiting for their endpoint's
turn, being sent, or answered and waiting for their attempt to be recorded), at most
``per_tenant`` of one tenant's, and at most ``per_endpoint + per_endpoint_waiting`` of one
endpoint's not yet answered; it runs at most ``per_endpoint`` attempts to one endpoint at a
time (an `asyncio.Semaphore` per endpoint). An attempt leaves its endpoint's share (and
gives back its permit) as soon as its POST is answered or fails: recording it, which for a
delivery waits for its batch's commit, takes neither, so an endpoint that answers quickly
is sent to while earlier answers are written (it still counts against the tenant's share
and the total until it is recorded). So a dead endpoint (every attempt waits for the
timeout) or one tenant's burst holds only its share: an endpoint or tenant at its share is
left out of the next claim, and other tenants' messages are claimed past it. The waiting
allowance keeps a busy, healthy endpoint's semaphore fed between two claims.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from frontdoor_webhooks.claims import Candidate

__all__ = ["MAX_HELD", "PER_ENDPOINT", "PER_ENDPOINT_WAITING", "PER_TENANT", "Lanes"]

MAX_HELD: Final = 512
PER_TENANT: Final = 256
PER_ENDPOINT: Final = 16
PER_ENDPOINT_WAITING: Final = 48


@dataclass
class Lanes:
    """One deliverer's held claims and running attempts (touched only from its event loop)."""

    total: int = MAX_HELD
    per_tenant: int = PER_TENANT
    per_endpoint: int = PER_ENDPOINT
    per_endpoint_waiting: int = PER_ENDPOINT_WAITING
    held: int = 0
    by_tenant: Counter[str] = field(default_factory=Counter)
    by_endpoint: Counter[str] = field(default_factory=Counter)
    backlogged: set[str] = field(default_factory=set)
    """Endpoints whose last claim took all the room they had: more of their messages are likely due."""
    _gates: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    @property
    def room(self) -> int:
        """How many more claims this deliverer may hold."""
        return max(self.total - self.held, 0)

    def full_endpoints(self) -> list[str]:
        """Endpoints at their share (left out of the next claim)."""
        cap = self.endpoint_share
        return [e for e, n in self.by_endpoint.items() if n >= cap]

    def endpoint_rooms(self) -> dict[str, int]:
        """How many more claims each endpoint this deliverer holds claims of may take (0: at its share)."""
        cap = self.endpoint_share
        return {e: max(cap - n, 0) for e, n in self.by_endpoint.items()}

    @property
    def endpoint_share(self) -> int:
        """Claims one endpoint may hold not yet answered (its room when none are held)."""
        return self.per_endpoint + self.per_endpoint_waiting

    def claimed(self, rooms: dict[str, int], room: int, taken: Counter[str]) -> None:
        """After a claim pass: note which endpoints took all their room (``rooms``, else ``room``) and which did not.

        An endpoint the pass had no room for (left out of it) keeps what the last pass said.
        """
        for endpoint_id in set(rooms) | set(taken) | self.backlogged:
            had = rooms.get(endpoint_id, room)
            if had <= 0:
                continue
            if taken[endpoint_id] >= had:
                self.backlogged.add(endpoint_id)
            else:
                self.backlogged.discard(endpoint_id)

    def hungry(self) -> bool:
        """A backlogged endpoint has room for half its share again: claim for it now, not after a pause.

        With the defaults (16 at once, 48 waiting) about one round of its claims is left waiting
        for its permits then; a pass now keeps them fed instead of idle until the next paced pass.
        """
        cap = self.endpoint_share
        return any(cap - self.by_endpoint.get(e, 0) >= cap // 2 for e in self.backlogged)

    def full_tenants(self) -> list[str]:
        """Tenants at their share."""
        return [t for t, n in self.by_tenant.items() if n >= self.per_tenant]

    def choose(self, found: list[Candidate]) -> list[Candidate]:
        """Those of ``found`` there is room for, in order; each chosen one is counted as held."""
        chosen = []
        cap = self.endpoint_share
        for c in found:
            if self.held >= self.total:
                break
            if self.by_endpoint[c.endpoint_id] >= cap or self.by_tenant[c.tenant_id] >= self.per_tenant:
                continue
            self._hold(c.tenant_id, c.endpoint_id)
            chosen.append(c)
        return chosen

    def _hold(self, tenant_id: str, endpoint_id: str) -> None:
        self.held += 1
        self.by_tenant[tenant_id] += 1
        self.by_endpoint[endpoint_id] += 1
        if endpoint_id not in self._gates:
            self._gates[endpoint_id] = asyncio.Semaphore(self.per_endpoint)

    def answered(self, endpoint_id: str) -> None:
        """A held claim's POST was answered (or failed): it no longer takes its endpoint's share.

        It stays held (the total, its tenant's share) until `release` with ``answered=True``.
        """
        self._leave_endpoint(endpoint_id)

    def release(self, tenant_id: str, endpoint_id: str, *, answered: bool = False) -> None:
        """One held claim is done with (attempted and recorded, or dropped unstarted).

        ``answered``: `answered` was called for it already (its endpoint's share is free).
        """
        self.held -= 1
        self.by_tenant[tenant_id] -= 1
        if self.by_tenant[tenant_id] <= 0:
            del self.by_tenant[tenant_id]
        if not answered:
            self._leave_endpoint(endpoint_id)

    def _leave_endpoint(self, endpoint_id: str) -> None:
        self.by_endpoint[endpoint_id] -= 1
        if self.by_endpoint[endpoint_id] <= 0:
            del self.by_endpoint[endpoint_id]
            self._gates.pop(endpoint_id, None)

    def gate(self, endpoint_id: str) -> asyncio.Semaphore:
        """The endpoint's semaphore: at most ``per_endpoint`` attempts run at once."""
        return self._gates[endpoint_id]
