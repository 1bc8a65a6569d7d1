"""Endpoints over real PostgreSQL: CRUD, secrets at rest, rotation, audit, and two-tenant isolation."""

from __future__ import annotations

from datetime import timedelta

import msgspec
import pytest
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import (
    create_endpoint,
    delete_endpoint,
    disable_endpoint,
    enable_endpoint,
    get_endpoint,
    list_endpoints,
    rotate_secret,
    signing_secrets,
    update_endpoint,
)

URL = "https://hooks.example.com/frontdoor"


async def test_create_get_list_update_delete(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    now = runtime.clock()
    async with runtime.pool.acquire() as conn, conn.transaction():
        created = await create_endpoint(conn, actor, url=URL, kek=kek, now=now, description=" Orders ",
                                        event_types=["operation.succeeded", "operation.confirmed"],
                                        rate_limit_per_second=20)
        endpoint = created.endpoint
        assert endpoint.id.startswith("whe_") and endpoint.tenant_id == actor.tenant_id
        assert endpoint.event_types == ["operation.confirmed", "operation.succeeded"]
        assert endpoint.description == "Orders" and endpoint.enabled and endpoint.rate_limit_per_second == 20
        assert created.secret.startswith("whsec_")
        assert await get_endpoint(conn, actor.tenant_id, endpoint.id) == endpoint
        assert [e.id for e in await list_endpoints(conn, actor.tenant_id)] == [endpoint.id]

        changed = await update_endpoint(conn, actor, endpoint.id, now=now, url="https://hooks.example.com/v2",
                                        event_types=["session.signed_in"], rate_limit_per_second=None)
        assert changed.url == "https://hooks.example.com/v2" and changed.event_types == ["session.signed_in"]
        assert changed.rate_limit_per_second is None and changed.description == "Orders"
        untouched = await update_endpoint(conn, actor, endpoint.id, now=now, description="Still")
        assert untouched.url == changed.url and untouched.event_types == changed.event_types

        off = await update_endpoint(conn, actor, endpoint.id, now=now, enabled=False)
        assert not off.enabled and off.disabled_reason == "manual" and off.disabled_at is not None
        on = await update_endpoint(conn, actor, endpoint.id, now=now, enabled=True)
        assert on.enabled and on.disabled_reason is None and on.disabled_at is None

        await delete_endpoint(conn, actor, endpoint.id, now=now)
        with pytest.raises(NotFound):
            await get_endpoint(conn, actor.tenant_id, endpoint.id)
        assert await conn.fetchval("SELECT count(*) FROM webhook_secrets WHERE tenant_id = $1", actor.tenant_id) == 0
        actions = [e.action for e in await audit.list_entries(conn, actor.tenant_id)]
    assert actions == ["webhook_endpoint.deleted", "webhook_endpoint.enabled", "webhook_endpoint.disabled",
                       "webhook_endpoint.updated", "webhook_endpoint.updated", "webhook_endpoint.created"]


async def test_invalid_input_is_refused(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    now = runtime.clock()
    async with runtime.pool.acquire() as conn:
        for kwargs in ({"url": "http://hooks.example.com/x"}, {"url": URL, "event_types": ["nope"]},
                       {"url": URL, "rate_limit_per_second": 0}, {"url": URL, "description": "x" * 501},
                       {"url": "http://127.0.0.1:9/x"}):
            with pytest.raises(Invalid):
                await create_endpoint(conn, actor, kek=kek, now=now, **kwargs)  # type: ignore[arg-type]
        assert await list_endpoints(conn, actor.tenant_id) == []
        created = await create_endpoint(conn, actor, url=URL, kek=kek, now=now)
        with pytest.raises(Invalid):
            await update_endpoint(conn, actor, created.endpoint.id, now=now, url="https://u:p@hooks.example.com/")
        with pytest.raises(Invalid):
            await rotate_secret(conn, actor, created.endpoint.id, kek=kek, now=now, overlap=timedelta(days=8))


async def test_secret_is_encrypted_at_rest_and_bound_to_its_row(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    now = runtime.clock()
    async with runtime.pool.acquire() as conn, conn.transaction():
        a = await create_endpoint(conn, actor, url=URL, kek=kek, now=now)
        b = await create_endpoint(conn, actor, url=URL, kek=kek, now=now)
        rows = await conn.fetch("SELECT endpoint_id, secret_ciphertext FROM webhook_secrets WHERE tenant_id = $1",
                                actor.tenant_id)
        for row in rows:
            blob = bytes(row["secret_ciphertext"])
            assert a.secret.encode() not in blob and b.secret.encode() not in blob and b"whsec_" not in blob
        assert await signing_secrets(conn, actor.tenant_id, a.endpoint.id, kek, now) == [a.secret]
        # a blob moved to another endpoint's row does not open there
        await conn.execute(
            "UPDATE webhook_secrets SET secret_ciphertext = (SELECT secret_ciphertext FROM webhook_secrets"
            " WHERE tenant_id = $1 AND endpoint_id = $2) WHERE tenant_id = $1 AND endpoint_id = $3",
            actor.tenant_id, a.endpoint.id, b.endpoint.id)
        from frontdoor_tenancy.credentials import DecryptionError
        with pytest.raises(DecryptionError):
            await signing_secrets(conn, actor.tenant_id, b.endpoint.id, kek, now)
    assert a.secret not in repr(a.endpoint) and "secret" not in msgspec.structs.asdict(a.endpoint)


async def test_rotation_keeps_the_old_secret_for_the_overlap_only(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    now = runtime.clock()
    async with runtime.pool.acquire() as conn, conn.transaction():
        created = await create_endpoint(conn, actor, url=URL, kek=kek, now=now)
        endpoint_id = created.endpoint.id
        second = await rotate_secret(conn, actor, endpoint_id, kek=kek, now=now, overlap=timedelta(hours=1))
        assert await signing_secrets(conn, actor.tenant_id, endpoint_id, kek, now) == [second, created.secret]
        assert await signing_secrets(conn, actor.tenant_id, endpoint_id, kek, now + timedelta(hours=1)) == [second]
        # rotating again at once: the first secret keeps its own expiry, the second gets one
        third = await rotate_secret(conn, actor, endpoint_id, kek=kek, now=now, overlap=timedelta(0))
        assert await signing_secrets(conn, actor.tenant_id, endpoint_id, kek, now) == [third, created.secret]
        later = now + timedelta(hours=2)
        fourth = await rotate_secret(conn, actor, endpoint_id, kek=kek, now=later, overlap=timedelta(minutes=5))
        assert await signing_secrets(conn, actor.tenant_id, endpoint_id, kek, later) == [fourth, third]
        # expired rows were deleted by the rotation at `later`
        count = await conn.fetchval("SELECT count(*) FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2",
                                    actor.tenant_id, endpoint_id)
        assert count == 2
        entries = await audit.list_entries(conn, actor.tenant_id, action="webhook_endpoint.secret_rotated")
    assert len(entries) == 3
    for entry in entries:
        assert "whsec_" not in msgspec.json.encode(entry).decode()


async def test_another_tenant_sees_and_changes_nothing(runtime: Runtime, actor: Actor, other_tenant_id: str,
                                                       kek: Kek) -> None:
    now = runtime.clock()
    intruder = Actor(tenant_id=other_tenant_id, type="api_key", id="key_other")
    async with runtime.pool.acquire() as conn, conn.transaction():
        endpoint_id = (await create_endpoint(conn, actor, url=URL, kek=kek, now=now)).endpoint.id
        assert await list_endpoints(conn, other_tenant_id) == []
        with pytest.raises(NotFound):
            await get_endpoint(conn, other_tenant_id, endpoint_id)
        with pytest.raises(NotFound):
            await update_endpoint(conn, intruder, endpoint_id, now=now, url="https://evil.example.com/x")
        with pytest.raises(NotFound):
            await rotate_secret(conn, intruder, endpoint_id, kek=kek, now=now, overlap=timedelta(0))
        with pytest.raises(NotFound):
            await disable_endpoint(conn, intruder, endpoint_id, reason="manual", now=now)
        with pytest.raises(NotFound):
            await enable_endpoint(conn, intruder, endpoint_id, now=now)
        with pytest.raises(NotFound):
            await delete_endpoint(conn, intruder, endpoint_id, now=now)
        assert await signing_secrets(conn, other_tenant_id, endpoint_id, kek, now) == []
        endpoint = await get_endpoint(conn, actor.tenant_id, endpoint_id)
    assert endpoint.url == URL and endpoint.enabled
