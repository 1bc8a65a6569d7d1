"""Operation kinds, webhook endpoints and the operations ledger in the management API.

``/api/v1/operation-kinds``: what agents may be asked to confirm and which endpoint performs it;
``/api/v1/webhook-endpoints``: where Frontdoor calls the company (secrets shown once, rotation,
optional Ed25519 signing, enable/disable, test events, messages and their attempts, redeliver,
recovery jobs with progress);
``/api/v1/operations``: the ledger, read-only (the company's servers use the ledger API).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec
from frontdoor_conversations import publish_changed, relay_endpoints
from frontdoor_core.db import transaction
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_operations import kinds as op_kinds
from frontdoor_operations import ledger
from frontdoor_operations.kinds import Kind, KindInput
from frontdoor_operations.ledger import ListFilters
from frontdoor_tenancy.actor import Actor
from frontdoor_webhooks import attempts as wh_attempts
from frontdoor_webhooks import endpoint_secrets as wh_secrets
from frontdoor_webhooks import endpoints as wh
from frontdoor_webhooks import messages as wh_messages
from frontdoor_webhooks import recoveries as wh_recoveries
from frontdoor_webhooks.attempts import Attempt
from frontdoor_webhooks.endpoint_secrets import PublicKey
from frontdoor_webhooks.endpoints import Endpoint
from frontdoor_webhooks.recoveries import Recovery
from litestar import delete, get, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, Parameter

from . import billing_pages
from .deps import ctx_of, require_writer, tenant_quota
from .pagination import CURSOR, LIMIT, cursor_time, decode_cursor, page
from .problems import PROBLEMS

__all__ = ["operations_endpoint", "routes"]


async def operations_endpoint(conn: Any, settings: Any, tenant_id: str) -> str | None:
    """The tenant's operations endpoint at the ledger, when it has operation kinds (for poppy.json)."""
    if not await op_kinds.has_kinds(conn, tenant_id):
        return None
    slug = await conn.fetchval("SELECT slug FROM tenants WHERE id = $1", tenant_id)
    return f"{settings.ledger_base_url}/{slug}/operations"


class KindList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[Kind]


@get("/api/v1/operation-kinds", tags=["operations"], summary="Every operation kind", responses=PROBLEMS)
async def kinds_list(actor: NamedDependency[Actor], state: State) -> KindList:
    async with ctx_of(state).pool.acquire() as conn:
        return KindList(data=await op_kinds.list_kinds(conn, actor.tenant_id))


@put("/api/v1/operation-kinds/{name:str}", tags=["operations"], summary="Create or replace an operation kind",
     responses=PROBLEMS, status_code=200,
     description="The scopes a confirm needs, default and maximum expiry (seconds), the webhook endpoint that "
                 "performs it, and optionally an endpoint asked for current terms at confirm time.")
async def kinds_put(name: FromPath[str], data: JSONBody[KindInput], actor: NamedDependency[Actor],
                    state: State) -> Kind:
    require_writer(actor)
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        return await op_kinds.put_kind(conn, actor, name, data, now=ctx.now())


@delete("/api/v1/operation-kinds/{name:str}", tags=["operations"], summary="Delete an unused operation kind",
        responses=PROBLEMS, status_code=204)
async def kinds_delete(name: FromPath[str], actor: NamedDependency[Actor], state: State) -> None:
    require_writer(actor)
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        await op_kinds.delete_kind(conn, actor, name, now=ctx.now())


# --- webhook endpoints --------------------------------------------------------------------


class EndpointIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    url: str
    description: str = ""
    event_types: list[str] = msgspec.field(default_factory=list)
    rate_limit_per_second: int | None = None
    signing_scheme: Literal["v1", "v1a"] = "v1"


class EndpointPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    url: str | msgspec.UnsetType = msgspec.UNSET
    description: str | msgspec.UnsetType = msgspec.UNSET
    event_types: list[str] | msgspec.UnsetType = msgspec.UNSET
    rate_limit_per_second: int | msgspec.UnsetType | None = msgspec.UNSET


class EndpointCreated(msgspec.Struct, frozen=True, kw_only=True):
    endpoint: Endpoint
    secret: str


class EndpointList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[Endpoint]
    next_cursor: str | None = None


class RotateIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    overlap_seconds: int | None = None


def _overlap(data: RotateIn | None, default: timedelta) -> timedelta:
    # Bounded before a timedelta is built: a huge overlap_seconds is a 422, not an OverflowError.
    return wh.check_overlap(data.overlap_seconds) if data is not None and data.overlap_seconds is not None else default


class SecretOut(msgspec.Struct, frozen=True, kw_only=True):
    secret: str


@post("/api/v1/webhook-endpoints", tags=["webhooks"], summary="Add a webhook endpoint", responses=PROBLEMS,
      status_code=201, description="Answers the endpoint and its whsec_ signing secret, shown this once. "
                                   "signing_scheme v1a also signs every delivery with Ed25519 (v1a); the "
                                   "endpoint's public_key (whpk_...) verifies it.")
async def endpoints_create(data: JSONBody[EndpointIn], actor: NamedDependency[Actor], state: State) -> EndpointCreated:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        await billing_pages.require_room(state, conn, actor.tenant_id, "webhook_endpoints")
        created = await wh.create_endpoint(conn, actor, url=data.url, kek=ctx.kek, now=ctx.now(),
                                           description=data.description, event_types=data.event_types,
                                           rate_limit_per_second=data.rate_limit_per_second,
                                           signing_scheme=data.signing_scheme,
                                           max_endpoints=ctx.settings.webhook_endpoint_limit,
                                           allow_insecure=ctx.settings.is_dev,
                                           allowlist=ctx.settings.webhook_allowlist_entries())
    return EndpointCreated(endpoint=created.endpoint, secret=created.secret)


@get("/api/v1/webhook-endpoints", tags=["webhooks"], summary="The webhook endpoints, oldest first",
     responses=PROBLEMS)
async def endpoints_list(actor: NamedDependency[Actor], state: State, limit: int = LIMIT,
                         cursor: str | None = CURSOR) -> EndpointList:
    key = decode_cursor(cursor)
    async with ctx_of(state).pool.acquire() as conn:
        rows = await wh.list_endpoints(conn, actor.tenant_id, after=key[0] if key else None, limit=limit + 1)
    data, next_cursor = page(rows, limit, lambda e: (e.id,))
    return EndpointList(data=data, next_cursor=next_cursor)


@get("/api/v1/webhook-endpoints/{endpoint_id:str}", tags=["webhooks"], summary="One webhook endpoint",
     responses=PROBLEMS)
async def endpoints_get(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> Endpoint:
    async with ctx_of(state).pool.acquire() as conn:
        return await wh.get_endpoint(conn, actor.tenant_id, endpoint_id)


@post("/api/v1/webhook-endpoints/{endpoint_id:str}", tags=["webhooks"], summary="Change a webhook endpoint",
      responses=PROBLEMS, status_code=200)
async def endpoints_update(endpoint_id: FromPath[str], data: JSONBody[EndpointPatch], actor: NamedDependency[Actor],
                           state: State) -> Endpoint:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        return await wh.update_endpoint(conn, actor, endpoint_id, now=ctx.now(), url=data.url,
                                        description=data.description, event_types=data.event_types,
                                        rate_limit_per_second=data.rate_limit_per_second,
                                        allow_insecure=ctx.settings.is_dev,
                                        allowlist=ctx.settings.webhook_allowlist_entries())


@delete("/api/v1/webhook-endpoints/{endpoint_id:str}", tags=["webhooks"], summary="Delete a webhook endpoint",
        responses=PROBLEMS, status_code=204)
async def endpoints_delete(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> None:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:  # its pending relays' conversations go to a person
        changed = await relay_endpoints.delete_endpoint(conn, actor, endpoint_id, now=ctx.now())
    for cid in changed:
        await publish_changed(ctx.redis, actor.tenant_id, cid)


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/rotate-secret", tags=["webhooks"], responses=PROBLEMS,
      status_code=200, summary="Rotate the signing secret",
      description="Answers the new secret, shown this once. The old one keeps signing beside it for "
                  "overlap_seconds (default FRONTDOOR_WEBHOOK_SECRET_OVERLAP).")
async def endpoints_rotate(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State,
                           data: JSONBody[RotateIn] | None = None) -> SecretOut:
    require_writer(actor)
    ctx = ctx_of(state)
    overlap = _overlap(data, ctx.settings.webhook_secret_overlap)
    async with transaction(ctx.pool) as conn:
        secret = await wh.rotate_secret(conn, actor, endpoint_id, kek=ctx.kek, now=ctx.now(), overlap=overlap)
    return SecretOut(secret=secret)


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/enable", tags=["webhooks"], responses=PROBLEMS,
      status_code=200, summary="Enable (re-enable) an endpoint; its waiting messages are sent")
async def endpoints_enable(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> Endpoint:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        return await wh.enable_endpoint(conn, actor, endpoint_id, now=ctx.now())


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/disable", tags=["webhooks"], responses=PROBLEMS,
      status_code=200, summary="Disable an endpoint; its messages wait")
async def endpoints_disable(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> Endpoint:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:  # its pending relays' conversations go to a person
        endpoint, changed = await relay_endpoints.disable_endpoint(conn, actor, endpoint_id, reason="manual",
                                                                   now=ctx.now())
    for cid in changed:
        await publish_changed(ctx.redis, actor.tenant_id, cid)
    return endpoint


class MessageList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[Any]


@get("/api/v1/webhook-endpoints/{endpoint_id:str}/messages", tags=["webhooks"], responses=PROBLEMS,
     summary="The endpoint's messages, newest first")
async def endpoint_messages(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State,
                            limit: int = Parameter(default=50, ge=1, le=200)) -> MessageList:
    async with ctx_of(state).pool.acquire() as conn:
        await wh.get_endpoint(conn, actor.tenant_id, endpoint_id)
        found = await wh_messages.list_messages(conn, actor.tenant_id, endpoint_id=endpoint_id, limit=limit)
    return MessageList(data=[msgspec.to_builtins(m) for m in found])


@post("/api/v1/webhook-messages/{message_id:str}/redeliver", tags=["webhooks"], responses=PROBLEMS,
      status_code=200, summary="Send a message again (same webhook-id)")
async def message_redeliver(message_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> Any:
    require_writer(actor)
    ctx = ctx_of(state)
    await tenant_quota(ctx, actor.tenant_id, "webhook_redelivery")
    async with transaction(ctx.pool) as conn:
        return msgspec.to_builtins(await wh_messages.redeliver(conn, actor, message_id, now=ctx.now()))


class SigningKeys(msgspec.Struct, frozen=True, kw_only=True):
    signing_scheme: str
    public_keys: list[PublicKey]


@get("/api/v1/webhook-endpoints/{endpoint_id:str}/signing-key", tags=["webhooks"], responses=PROBLEMS,
     summary="The endpoint's Ed25519 public keys (v1a)",
     description="Every public key a v1a signature may currently be made with: the current one first, then "
                 "a rotated one until its overlap ends. whpk_ and the base64 of the raw 32-byte key.")
async def endpoints_signing_keys(endpoint_id: FromPath[str], actor: NamedDependency[Actor],
                                 state: State) -> SigningKeys:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        endpoint = await wh.get_endpoint(conn, actor.tenant_id, endpoint_id)
        keys = await wh_secrets.public_keys(conn, actor.tenant_id, endpoint_id, ctx.now())
    return SigningKeys(signing_scheme=endpoint.signing_scheme, public_keys=keys)


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/signing-key", tags=["webhooks"], responses=PROBLEMS,
      status_code=200, summary="Turn on Ed25519 signing (v1a), or rotate its key",
      description="Answers the endpoint with its new public_key. A previous key keeps signing beside it for "
                  "overlap_seconds (default FRONTDOOR_WEBHOOK_SECRET_OVERLAP). HMAC (v1) signatures continue.")
async def endpoints_rotate_signing_key(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State,
                                       data: JSONBody[RotateIn] | None = None) -> Endpoint:
    require_writer(actor)
    ctx = ctx_of(state)
    overlap = _overlap(data, ctx.settings.webhook_secret_overlap)
    async with transaction(ctx.pool) as conn:
        return await wh.rotate_signing_key(conn, actor, endpoint_id, kek=ctx.kek, now=ctx.now(), overlap=overlap)


@delete("/api/v1/webhook-endpoints/{endpoint_id:str}/signing-key", tags=["webhooks"], responses=PROBLEMS,
        status_code=200, summary="Turn off Ed25519 signing: back to v1 (HMAC) only")
async def endpoints_remove_signing_key(endpoint_id: FromPath[str], actor: NamedDependency[Actor],
                                       state: State) -> Endpoint:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        return await wh.remove_signing_key(conn, actor, endpoint_id, now=ctx.now())


class TestSent(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str
    event_type: str


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/test", tags=["webhooks"], responses=PROBLEMS,
      status_code=202, summary="Send a webhook.test event to the endpoint",
      description="Queued like any message: signed, retried, its attempts listed under the message. A disabled "
                  "endpoint's test waits until it is enabled.")
async def endpoint_test(endpoint_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> TestSent:
    require_writer(actor)
    ctx = ctx_of(state)
    await tenant_quota(ctx, actor.tenant_id, "webhook_test")
    async with transaction(ctx.pool) as conn:
        message_id = await wh_messages.send_test(conn, actor, endpoint_id, now=ctx.now())
    return TestSent(message_id=message_id, event_type="webhook.test")


class MessageDetail(msgspec.Struct, frozen=True, kw_only=True):
    message: dict[str, Any]
    attempts: list[Attempt]


@get("/api/v1/webhook-messages/{message_id:str}", tags=["webhooks"], responses=PROBLEMS,
     summary="One message with every attempt",
     description="The exact body sent, its state, and each attempt oldest first: status, duration, error class, "
                 "a bounded response excerpt, the request headers (signatures redacted), the next attempt time.")
async def message_get(message_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> MessageDetail:
    async with ctx_of(state).pool.acquire() as conn:
        message = await wh_messages.get_message(conn, actor.tenant_id, message_id)
        attempts = await wh_attempts.list_attempts(conn, actor.tenant_id, message_id)
    return MessageDetail(message=msgspec.to_builtins(message), attempts=attempts)


class RecoverIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    since: datetime


@post("/api/v1/webhook-endpoints/{endpoint_id:str}/recover", tags=["webhooks"], responses=PROBLEMS,
      status_code=202, summary="Send again every failed message of the endpoint since a time (a background job)",
      description="Answers the recovery job; the worker requeues the exhausted and aborted messages created "
                  "between since and now in chunks. Follow it at /api/v1/webhook-recoveries/{id}.")
async def endpoint_recover(endpoint_id: FromPath[str], data: JSONBody[RecoverIn], actor: NamedDependency[Actor],
                           state: State) -> Recovery:
    require_writer(actor)
    ctx = ctx_of(state)
    if data.since.tzinfo is None:
        raise Invalid("invalid_since", "since must include a timezone.", fields={"since": "needs a timezone"})
    await tenant_quota(ctx, actor.tenant_id, "webhook_recovery")
    async with transaction(ctx.pool) as conn:
        return await wh_recoveries.start_recovery(conn, actor, endpoint_id, since=data.since, now=ctx.now())


@get("/api/v1/webhook-recoveries/{recovery_id:str}", tags=["webhooks"], responses=PROBLEMS,
     summary="A recovery job's progress", description="state queued, running or done; requeued of total.")
async def recovery_get(recovery_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> Recovery:
    async with ctx_of(state).pool.acquire() as conn:
        return await wh_recoveries.get_recovery(conn, actor.tenant_id, recovery_id)


# --- operations (read-only) -------------------------------------------------------------


class OperationList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[dict[str, Any]]
    next_cursor: str | None = None


def _admin_view(op: ledger.Operation) -> dict[str, Any]:
    return {"operation": ledger.to_wire(op), "kind": op.kind, "client_id": op.client_id, "user_id": op.user_id,
            "account": op.account_id, "confirmed_via": op.confirmed_via, "needs_attention": op.attention is not None,
            "attention_reason": op.attention,
            "perform_message_id": op.perform_message_id, "created_at": op.created_at.isoformat(),
            "updated_at": op.updated_at.isoformat()}


@get("/api/v1/operations", tags=["operations"], responses=PROBLEMS, summary="The operations ledger, newest first")
async def operations_list(actor: NamedDependency[Actor], state: State, *,
                          state_filter: str | None = Parameter(query="state", default=None),
                          kind: str | None = Parameter(default=None),
                          account: str | None = Parameter(default=None),
                          client_id: str | None = Parameter(default=None),
                          needs_attention: bool | None = Parameter(default=None),
                          limit: int = LIMIT, cursor: str | None = CURSOR) -> OperationList:
    filters = ListFilters(state=state_filter, kind=kind, account=account, client_id=client_id,
                          attention=needs_attention)
    key = decode_cursor(cursor, 2)
    moment = cursor_time(key[0]) if key else None
    before = (moment, key[1]) if key and moment else None
    async with ctx_of(state).pool.acquire() as conn:
        found = await ledger.list_operations(conn, actor.tenant_id, filters, limit=limit + 1, before=before)
    shown, next_cursor = page(found, limit, lambda op: (op.created_at.isoformat(), op.id))
    return OperationList(data=[_admin_view(op) for op in shown], next_cursor=next_cursor)


@get("/api/v1/operations/{operation_id:str}", tags=["operations"], responses=PROBLEMS,
     summary="One operation with every revision")
async def operations_get(operation_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> dict[str, Any]:
    async with ctx_of(state).pool.acquire() as conn:
        op = await ledger.get_operation(conn, actor.tenant_id, operation_id)
        if op is None:
            raise NotFound("operation_not_found", "No such operation.")
        revisions = await ledger.revisions(conn, actor.tenant_id, operation_id)
    return {**_admin_view(op), "revisions": [msgspec.to_builtins(r) for r in revisions]}


routes = [kinds_list, kinds_put, kinds_delete, endpoints_create, endpoints_list, endpoints_get, endpoints_update,
          endpoints_delete, endpoints_rotate, endpoints_enable, endpoints_disable, endpoint_messages,
          message_redeliver, endpoint_recover, endpoints_signing_keys, endpoints_rotate_signing_key,
          endpoints_remove_signing_key, endpoint_test, message_get, recovery_get, operations_list, operations_get]
