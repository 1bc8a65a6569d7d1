"""domain.verified and domain.suspended reach subscribed endpoints: a DNS check (a real local
DNS server) writes the tenancy outbox row in its transaction, the forwarder makes the
signed message with the documented payload."""

from __future__ import annotations

import json
from typing import Any

import standardwebhooks
from frontdoor_core.runtime import Runtime
from frontdoor_webhooks import payload_for, verify
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb
from tests.support.webhook_inbox import subscribe


async def test_domain_verified_then_suspended_are_delivered(
        console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, dns: LocalDNS,
        runtime: Runtime, clock: ShiftableClock, web: MockWeb, kek_value: str, db: Any) -> None:
    inbox = await subscribe(console, tenant.auth, tenant.id, runtime, web, kek_value,
                            ["domain.verified", "domain.suspended"])
    bystander = await subscribe(console, other_tenant.auth, other_tenant.id, runtime, web, kek_value,
                                ["domain.verified", "domain.suspended"])
    domain = f"{unique('hook-')}.example.com"
    r = await console.post("/api/v1/domains", json={"domain": domain}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    name, value = r.json()["txt"]["name"], r.json()["txt"]["value"]

    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.json()["status"] == "pending"
    assert await inbox.forward_and_deliver() == []  # no transition, no event

    dns.set_txt(name, [value])
    try:
        r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
        assert r.json()["status"] == "verified", r.text
        [request] = await inbox.forward_and_deliver()
        payload = standardwebhooks.Webhook(inbox.secret).verify(request.content, dict(request.headers))
        assert payload["type"] == "domain.verified"
        verified = payload["data"]
        assert verified == {"sequence": verified["sequence"], "domain": domain, "previous_status": "pending",
                            "verified_at": verified["verified_at"]}
        assert payload_for("domain.verified", verified) == verified
        assert verified["verified_at"].endswith("Z")
        row = await db.fetchrow("SELECT sequence, forwarded_at FROM outbox_events WHERE tenant_id = $1"
                                " AND type = 'domain.verified'", tenant.id)
        assert row["sequence"] == verified["sequence"] and row["forwarded_at"] is not None

        # Verifying again changes nothing and reports nothing.
        await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
        assert await inbox.forward_and_deliver() == []
    finally:
        dns.remove(name)

    # Record gone past the grace period: a manual check suspends the domain.
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.json()["status"] == "verified" and r.json()["missing_since"]
    clock.advance(days=4)
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.json()["status"] == "suspended", r.text
    [request] = await inbox.forward_and_deliver()
    verify(inbox.secret, dict(request.headers), request.content, now=int(clock().timestamp()))
    body = json.loads(request.content)
    assert body["type"] == "domain.suspended"
    assert body["data"]["domain"] == domain and body["data"]["missing_since"].endswith("Z")
    assert body["data"]["sequence"] > verified["sequence"]
    assert bystander.received == []
