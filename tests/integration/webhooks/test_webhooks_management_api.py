"""The management API's webhook controls: test events, one message with its attempts,
Ed25519 (v1a) signing keys with rotation, and recovery as a chunked job with progress."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from frontdoor_core.runtime import Runtime
from frontdoor_sdk import WebhookVerifier
from frontdoor_webhooks import enqueue_message, payload_for, run_recoveries, run_recovery_chunk
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.support.mock_web import MockWeb
from tests.support.webhook_inbox import Inbox, subscribe


def _v1a_keys_that_verify(public_keys: list[str], request: Any) -> list[str]:
    """Which public keys verify one of the request's v1a signatures (checked with the raw primitive)."""
    content = f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + request.content
    signatures = [base64.b64decode(e[4:]) for e in request.headers["webhook-signature"].split(" ")
                  if e.startswith("v1a,")]
    good = []
    for public_key in public_keys:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
        for signature in signatures:
            try:
                key.verify(signature, content)
            except InvalidSignature:
                continue
            good.append(public_key)
    return good


async def _inbox(console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb,
                 kek_value: str, types: list[str] | None = None) -> Inbox:
    return await subscribe(console, tenant.auth, tenant.id, runtime, web, kek_value, types or [])


async def test_test_event_and_message_detail_with_attempts(
        console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime,
        web: MockWeb, kek_value: str) -> None:
    inbox = await _inbox(console, tenant, runtime, web, kek_value)
    endpoint_id = inbox.endpoint["id"]
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/test", headers=tenant.auth)
    assert r.status_code == 202, r.text
    message_id = r.json()["message_id"]
    assert r.json()["event_type"] == "webhook.test"

    r = await console.get(f"/api/v1/webhook-messages/{message_id}", headers=tenant.auth)
    assert r.status_code == 200 and r.json()["message"]["state"] == "pending" and r.json()["attempts"] == []

    [request] = await inbox.forward_and_deliver()
    payload = standardwebhooks.Webhook(inbox.secret).verify(request.content, dict(request.headers))
    assert payload["type"] == "webhook.test" and payload["data"]["endpoint_id"] == endpoint_id
    assert payload_for("webhook.test", payload["data"]) == payload["data"]

    detail = (await console.get(f"/api/v1/webhook-messages/{message_id}", headers=tenant.auth)).json()
    assert detail["message"]["state"] == "delivered" and detail["message"]["body"] == request.content.decode()
    [attempt] = detail["attempts"]
    assert attempt["attempt"] == 1 and attempt["response_status"] == 204 and attempt["error_class"] is None
    assert attempt["request_headers"]["webhook-signature"] == "[redacted]"
    assert inbox.secret not in json.dumps(detail)

    # Another tenant sees neither the message nor the endpoint; webhook.test cannot be subscribed to.
    other = other_tenant.auth
    assert (await console.get(f"/api/v1/webhook-messages/{message_id}", headers=other)).status_code == 404
    assert (await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/test", headers=other)).status_code == 404
    r = await console.post("/api/v1/webhook-endpoints", json={"url": inbox.url, "event_types": ["webhook.test"]},
                           headers=tenant.auth)
    assert r.status_code == 422, r.text


async def test_ed25519_signing_key_lifecycle(console: AsyncTestClient[Any], tenant: TenantHandle,
                                             other_tenant: TenantHandle, runtime: Runtime, web: MockWeb,
                                             kek_value: str, db: Any) -> None:
    inbox = await _inbox(console, tenant, runtime, web, kek_value)
    base = f"/api/v1/webhook-endpoints/{inbox.endpoint['id']}"
    assert inbox.endpoint["signing_scheme"] == "v1" and inbox.endpoint["public_key"] is None

    r = await console.post(f"{base}/signing-key", headers=tenant.auth)
    assert r.status_code == 200, r.text
    first = r.json()["public_key"]
    assert r.json()["signing_scheme"] == "v1a" and first.startswith("whpk_")
    assert len(base64.b64decode(first.removeprefix("whpk_"))) == 32
    # The private key is stored only encrypted: its bytes appear nowhere in the row.
    rows = await db.fetch("SELECT secret_ciphertext, public_key FROM webhook_secrets WHERE tenant_id = $1"
                          " AND endpoint_id = $2 AND algorithm = 'ed25519'", tenant.id, inbox.endpoint["id"])
    assert len(rows) == 1 and rows[0]["public_key"] == first and b"whsk_" not in bytes(rows[0]["secret_ciphertext"])

    await console.post(f"{base}/test", headers=tenant.auth)
    [request] = await inbox.forward_and_deliver()
    assert [e.split(",")[0] for e in request.headers["webhook-signature"].split(" ")] == ["v1", "v1a"]
    assert _v1a_keys_that_verify([first], request) == [first]
    standardwebhooks.Webhook(inbox.secret).verify(request.content, dict(request.headers))
    # The sdk verifies it with the public key alone, as a company's receiver would.
    assert WebhookVerifier(public_keys=first).check_signature(request.content, request.headers)[0] == \
        request.headers["webhook-id"]

    # Rotation with an overlap: both keys sign until it ends.
    r = await console.post(f"{base}/signing-key", json={"overlap_seconds": 3600}, headers=tenant.auth)
    second = r.json()["public_key"]
    assert second != first
    keys = (await console.get(f"{base}/signing-key", headers=tenant.auth)).json()
    assert [k["public_key"] for k in keys["public_keys"]] == [second, first]
    assert keys["public_keys"][0]["expires_at"] is None and keys["public_keys"][1]["expires_at"] is not None
    await console.post(f"{base}/test", headers=tenant.auth)
    [request] = await inbox.forward_and_deliver()
    assert sorted(_v1a_keys_that_verify([first, second], request)) == sorted([first, second])
    for key in (first, second):
        WebhookVerifier(public_keys=key).check_signature(request.content, request.headers)

    assert (await console.get(f"{base}/signing-key", headers=other_tenant.auth)).status_code == 404
    assert (await console.post(f"{base}/signing-key", headers=other_tenant.auth)).status_code == 404

    r = await console.delete(f"{base}/signing-key", headers=tenant.auth)
    assert r.status_code == 200 and r.json()["signing_scheme"] == "v1" and r.json()["public_key"] is None
    await console.post(f"{base}/test", headers=tenant.auth)
    [request] = await inbox.forward_and_deliver()
    assert all(e.startswith("v1,") for e in request.headers["webhook-signature"].split(" "))


async def test_recovery_is_a_chunked_job_with_progress(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                       other_tenant: TenantHandle, runtime: Runtime, web: MockWeb,
                                                       kek_value: str, db: Any) -> None:
    await run_recoveries(runtime.pool, runtime.clock)  # nothing else open in this database
    inbox = await _inbox(console, tenant, runtime, web, kek_value)
    endpoint_id = inbox.endpoint["id"]
    now = runtime.clock()

    async def failed(at_offset: timedelta, state: str = "exhausted") -> str:
        async with runtime.pool.acquire() as conn:
            message_id = await enqueue_message(conn, tenant.id, endpoint_id, "webhook.test",
                                               {"endpoint_id": endpoint_id, "sequence": 1}, purpose="event",
                                               now=now + at_offset)
            await conn.execute("UPDATE webhook_messages SET state = $3, attempts = 8, next_attempt_at = NULL,"
                               " failed_at = created_at WHERE tenant_id = $1 AND id = $2", tenant.id, message_id, state)
        return message_id

    too_old = await failed(timedelta(hours=-3))
    wanted = [await failed(timedelta(minutes=-50 + i), "aborted" if i == 2 else "exhausted") for i in range(5)]
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/recover",
                           json={"since": (now - timedelta(hours=1)).isoformat()}, headers=tenant.auth)
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["state"] == "queued" and job["total"] is None and job["requeued"] == 0
    later = await failed(timedelta(minutes=5))  # created after the request: not part of it

    progress = []
    while True:
        async with runtime.pool.acquire() as conn, conn.transaction():
            step = await run_recovery_chunk(conn, runtime.clock(), chunk=2)
        if step is None:
            break
        seen = (await console.get(f"/api/v1/webhook-recoveries/{job['id']}", headers=tenant.auth)).json()
        progress.append((seen["state"], seen["requeued"], seen["total"]))
    assert progress == [("running", 2, 5), ("running", 4, 5), ("done", 5, 5)]

    states = {r["id"]: (r["state"], r["failed"]) for r in await db.fetch(
        "SELECT id, state, failed_at IS NOT NULL AS failed FROM webhook_messages WHERE tenant_id = $1", tenant.id)}
    # queued again with a fresh schedule: no failed attempt in it yet (not "retrying" on the overview)
    assert all(states[m] == ("pending", False) for m in wanted)
    assert states[too_old] == ("exhausted", True) and states[later] == ("exhausted", True)
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1"
                             " AND action = 'webhook_endpoint.recovered'", tenant.id) == 1

    assert (await console.get(f"/api/v1/webhook-recoveries/{job['id']}",
                              headers=other_tenant.auth)).status_code == 404
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/recover",
                           json={"since": now.isoformat()}, headers=other_tenant.auth)
    assert r.status_code == 404
