"""Session and agent changes reach subscribed webhook endpoints: a real sign-in through the
issuer writes a session_events row in its transaction; the forwarder turns it into a
signed message with the documented payload; revocation, disconnect and blocking follow."""

from __future__ import annotations

import base64
import json
from typing import Any

import standardwebhooks
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.event_forwarder import forward_events
from frontdoor_sdk import WebhookVerifier
from frontdoor_webhooks import payload_for
from litestar.testing import AsyncTestClient

from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb
from tests.support.webhook_inbox import subscribe

from .conftest import Company

SESSION_TYPES = ["session.signed_in", "session.signed_out", "account.revoked", "agent.blocked"]


def _verify_v1a(public_key: str, request: Any) -> None:
    """Verify the Ed25519 signature independently of Frontdoor's code (the raw primitive)."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_"), validate=True))
    content = f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + request.content
    entries = [e.split(",", 1)[1] for e in request.headers["webhook-signature"].split(" ") if e.startswith("v1a,")]
    assert len(entries) == 1
    key.verify(base64.b64decode(entries[0]), content)  # raises InvalidSignature


async def test_sign_in_delivers_a_signed_session_signed_in_webhook(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, runtime: Runtime, web: MockWeb,
        kek_value: str, db: Any) -> None:
    inbox = await subscribe(console, company.tenant.auth, company.tenant.id, runtime, web, kek_value,
                            ["session.signed_in"], signing_scheme="v1a")
    public_key = inbox.endpoint["public_key"]
    assert public_key.startswith("whpk_") and inbox.endpoint["signing_scheme"] == "v1a"

    signed = await company.sign_in(agent, "alice", "acct-hook-1", scope="poppy:read")
    event = await db.fetchrow("SELECT id, sequence, forwarded_at FROM session_events WHERE tenant_id = $1"
                              " AND type = 'session.signed_in'", company.tenant.id)
    assert event["forwarded_at"] is None  # written with the sign-in, waiting for the forwarder

    [request] = await inbox.forward_and_deliver()

    payload = standardwebhooks.Webhook(inbox.secret).verify(request.content, dict(request.headers))
    _verify_v1a(public_key, request)
    assert (await WebhookVerifier(inbox.secret).verify(request.content, request.headers)).type == "session.signed_in"
    assert payload["type"] == "session.signed_in"
    assert payload["data"] == {
        "sequence": event["sequence"], "session_id": signed["session_id"], "client_id": agent.client_id,
        "user_id": "alice", "account": "acct-hook-1", "scope": "poppy:read", "sign_in_id": payload["data"]["sign_in_id"],
    }
    assert payload_for("session.signed_in", payload["data"]) == payload["data"]  # exactly the documented struct
    assert "token" not in request.content.decode() and signed["refresh_token"] not in request.content.decode()
    assert await db.fetchval("SELECT forwarded_at FROM session_events WHERE tenant_id = $1 AND id = $2",
                             company.tenant.id, event["id"]) is not None

    # Forwarding again moves nothing: each outbox row becomes messages exactly once.
    async with runtime.pool.acquire() as conn:
        await forward_events(conn)
    assert await db.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1", company.tenant.id) == 1


async def test_revocation_and_blocking_are_reported_with_growing_sequences(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, runtime: Runtime, web: MockWeb,
        kek_value: str) -> None:
    inbox = await subscribe(console, company.tenant.auth, company.tenant.id, runtime, web, kek_value, SESSION_TYPES)
    signed = await company.sign_in(agent, "bob", "acct-hook-2")
    r = await console.post("/api/v1/accounts/acct-hook-2/disconnect", headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=company.tenant.auth)
    assert r.status_code == 200, r.text

    bodies = [json.loads(req.content) for req in await inbox.forward_and_deliver()]
    by_type = {b["type"]: b["data"] for b in bodies}
    assert sorted(by_type) == sorted(SESSION_TYPES) and len(bodies) == 4
    for body in bodies:
        assert payload_for(body["type"], body["data"]) == body["data"]
    assert by_type["session.signed_out"]["session_id"] == signed["session_id"]
    assert by_type["session.signed_out"]["reason"] == "disconnected"
    assert by_type["account.revoked"] == {**by_type["account.revoked"], "account": "acct-hook-2",
                                          "client_id": agent.client_id, "reason": "disconnected"}
    assert by_type["agent.blocked"]["client_id"] == agent.client_id
    # The same Session's later change has the higher sequence: a receiver can drop the stale one.
    assert by_type["session.signed_out"]["sequence"] > by_type["session.signed_in"]["sequence"]


async def test_another_tenants_sign_in_reaches_only_its_own_endpoints(
        console: AsyncTestClient[Any], company: Company, other_company: Company, agent: TestAgent,
        runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    mine = await subscribe(console, company.tenant.auth, company.tenant.id, runtime, web, kek_value,
                           ["session.signed_in"])
    theirs = await subscribe(console, other_company.tenant.auth, other_company.tenant.id, runtime, web, kek_value,
                             ["session.signed_in"])
    await other_company.sign_in(agent, "carol", "acct-other")
    assert await mine.forward_and_deliver() == []
    [request] = await theirs.forward_and_deliver()
    assert json.loads(request.content)["data"]["account"] == "acct-other"
