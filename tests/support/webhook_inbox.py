"""A webhook endpoint for integration tests: registered over the management API, served by
`MockWeb`, and delivered to with the real delivery engine (no Celery, no relay)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.event_forwarder import forward_events
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.sender import SafeSender
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.support.mock_web import MockWeb


@dataclass
class Inbox:
    """One subscribed endpoint and every request it received."""

    runtime: Runtime
    web: MockWeb
    kek: Kek
    tenant_id: str
    url: str
    endpoint: dict[str, Any]
    secret: str
    received: list[httpx.Request] = field(default_factory=list)

    async def _receive(self, request: httpx.Request) -> httpx.Response:
        self.received.append(request)
        return httpx.Response(204)

    async def pending_messages(self) -> list[str]:
        rows = await self.runtime.pool.fetch(
            "SELECT id FROM webhook_messages WHERE tenant_id = $1 AND endpoint_id = $2 AND state = 'pending'"
            " ORDER BY id", self.tenant_id, self.endpoint["id"])
        return [r["id"] for r in rows]

    async def forward_and_deliver(self) -> list[httpx.Request]:
        """Run the forwarder, then one attempt at every pending message; return the new requests."""
        async with self.runtime.pool.acquire() as conn:
            await forward_events(conn)
        before = len(self.received)
        sender = SafeSender(SafeFetcher(transport=self.web))
        policy = DeliveryPolicy.from_settings(self.runtime.settings)
        for message_id in await self.pending_messages():
            report = await deliver(self.runtime.pool, message_id, sender=sender, kek=self.kek,
                                   clock=self.runtime.clock, policy=policy)
            assert report is not None and report.state == "delivered", report
        return self.received[before:]


async def subscribe(console: AsyncTestClient[Any], auth: dict[str, str], tenant_id: str, runtime: Runtime,
                    web: MockWeb, kek_value: str, event_types: list[str], **extra: Any) -> Inbox:
    """Register an endpoint for ``event_types`` and serve it."""
    url = f"https://{unique('hooks-')}.example/webhooks"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": url, "event_types": event_types, **extra},
                           headers=auth)
    assert r.status_code == 201, r.text
    inbox = Inbox(runtime=runtime, web=web, kek=Kek.from_env_value(kek_value), tenant_id=tenant_id, url=url,
                  endpoint=r.json()["endpoint"], secret=r.json()["secret"])
    web.handle(url, inbox._receive)
    return inbox
