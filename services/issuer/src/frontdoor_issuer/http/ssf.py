"""Shared Signals transmitter (ADR 0005): metadata, streams, RFC 8936 poll delivery.

- ``GET /.well-known/ssf-configuration/{slug}`` (SSF 1.0 §6.2: the well-known path
  inserted between the host and the issuer's path) and ``GET {issuer}/.well-known/
  ssf-configuration``: the transmitter configuration metadata.
- ``POST {issuer}/ssf/streams`` (resource-server credential): a new stream for one receiver;
  ``GET {issuer}/ssf/streams?stream_id=``: its configuration.
- ``POST {issuer}/ssf/streams/{id}/poll``: RFC 8936 with ``ack``, ``setErrs``,
  ``maxEvents``, ``returnImmediately``, plus Frontdoor's ``resync``; the answer adds
  ``position`` (every event up to it was acknowledged), ``lease`` (seconds the receiver may
  answer from memory, counted from when it sent the poll) and ``state`` (``live`` or
  ``behind``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from frontdoor_sessions import (
    EVENTS_SUPPORTED,
    StreamPolicy,
    acknowledge,
    create_stream,
    events_after,
    find_stream,
    grant_lease,
    head_seq,
    identify_credential,
    sign_set,
)
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery

from .discovery import not_found
from .oauth_errors import NO_STORE

__all__ = ["routes"]

POLL_METHOD: Final = "urn:ietf:rfc:8936"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-ssf"'}
_MAX_BODY: Final = 256 * 1024


class PollRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    ack: list[str] = msgspec.field(default_factory=list)
    setErrs: dict[str, dict[str, str]] = msgspec.field(default_factory=dict)
    maxEvents: int | None = None
    returnImmediately: bool = False
    resync: int | None = None


def _policy(state: State) -> StreamPolicy:
    policy = getattr(state, "ssf_policy", None)
    return policy if isinstance(policy, StreamPolicy) else StreamPolicy()


def _unauthorized() -> Response[Any]:
    return Response({"error": "invalid_client", "error_description": "Authenticate with a resource-server credential."},
                    status_code=401, headers={**NO_STORE, **_CHALLENGE})


def _bad(description: str) -> Response[Any]:
    return Response({"error": "invalid_request", "error_description": description}, status_code=400,
                    headers=NO_STORE)


def _configuration(issuer: str) -> dict[str, Any]:
    return {
        "spec_version": "1_0",
        "issuer": issuer,
        "jwks_uri": f"{issuer}/jwks.json",
        "delivery_methods_supported": [POLL_METHOD],
        "configuration_endpoint": f"{issuer}/ssf/streams",
        "authorization_schemes": [{"spec_urn": "urn:ietf:rfc:6750"}],
        "default_subjects": "ALL",
    }


def _stream_config(issuer: str, stream_id: str) -> dict[str, Any]:
    return {
        "stream_id": stream_id, "iss": issuer, "aud": stream_id,
        "events_supported": list(EVENTS_SUPPORTED), "events_delivered": list(EVENTS_SUPPORTED),
        "delivery": {"method": POLL_METHOD, "endpoint_url": f"{issuer}/ssf/streams/{stream_id}/poll"},
    }


async def _metadata(state: State, slug: str) -> Response[Any]:
    tenant = await state.ctx.tenant(slug)
    if tenant is None:
        return not_found()
    return Response(_configuration(tenant.issuer), headers={"Cache-Control": "public, max-age=300"})


@get("/.well-known/ssf-configuration/{slug:str}", summary="SSF transmitter metadata (path-inserted)")
async def configuration_path_inserted(slug: FromPath[str], state: State) -> Response[Any]:
    return await _metadata(state, slug)


@get("/{slug:str}/.well-known/ssf-configuration", summary="SSF transmitter metadata (appended)")
async def configuration_appended(slug: FromPath[str], state: State) -> Response[Any]:
    return await _metadata(state, slug)


async def _credential_id(state: State, request: Request[Any, Any, Any], tenant_id: str) -> str | None:
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    async with state.ctx.pool.acquire() as conn:
        return await identify_credential(conn, tenant_id, presented.strip())


@post("/{slug:str}/ssf/streams", status_code=201)
async def stream_create(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    tenant = await state.ctx.tenant(slug)
    if tenant is None:
        return not_found()
    credential_id = await _credential_id(state, request, tenant.tenant_id)
    if credential_id is None:
        return _unauthorized()
    async with state.ctx.pool.acquire() as conn, conn.transaction():
        stream = await create_stream(conn, tenant.tenant_id, credential_id)
    return Response(_stream_config(tenant.issuer, stream.id), status_code=201, headers=NO_STORE)


@get("/{slug:str}/ssf/streams")
async def stream_read(slug: FromPath[str], request: Request[Any, Any, Any], state: State,
                      stream_id: FromQuery[str] = "") -> Response[Any]:
    tenant = await state.ctx.tenant(slug)
    if tenant is None:
        return not_found()
    credential_id = await _credential_id(state, request, tenant.tenant_id)
    if credential_id is None:
        return _unauthorized()
    async with state.ctx.pool.acquire() as conn:
        stream = await find_stream(conn, tenant.tenant_id, stream_id, credential_id)
    if stream is None:
        return not_found()
    return Response(_stream_config(tenant.issuer, stream.id), headers=NO_STORE)


@post("/{slug:str}/ssf/streams/{stream_id:str}/poll", status_code=200)
async def stream_poll(slug: FromPath[str], stream_id: FromPath[str], request: Request[Any, Any, Any],
                      state: State) -> Response[Any]:
    ctx = state.ctx
    policy = _policy(state)
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    credential_id = await _credential_id(state, request, tenant.tenant_id)
    if credential_id is None:
        return _unauthorized()
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        return _bad("The poll request is too large.")
    try:
        poll = msgspec.json.decode(raw or b"{}", type=PollRequest)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _bad("The poll request is not valid.")
    limit = policy.max_events if poll.maxEvents is None else max(0, min(poll.maxEvents, policy.max_events))
    # RFC 8936 §2.4: a SET reported in setErrs is, like an acknowledged one, not sent again.
    acks = [*poll.ack, *poll.setErrs.keys()]
    async with ctx.pool.acquire() as conn:
        if await find_stream(conn, tenant.tenant_id, stream_id, credential_id) is None:
            return not_found()
        async with conn.transaction():
            polled = await acknowledge(conn, tenant.tenant_id, stream_id, acks, resync=poll.resync)
        if polled.behind:
            return _behind(await head_seq(conn, tenant.tenant_id))
        wakeups = getattr(state, "ssf_wakeups", None)
        generation = wakeups.generation if wakeups is not None else 0
        pending = await events_after(conn, tenant.tenant_id, polled.acked_seq, limit=1)
    if not pending and not poll.returnImmediately and limit > 0 and wakeups is not None:
        await wakeups.wait(generation, policy.hold)
    async with ctx.pool.acquire() as conn:
        async with conn.transaction():
            leased = await grant_lease(conn, tenant.tenant_id, stream_id, policy.lease)
            if leased.behind:
                return _behind(await head_seq(conn, tenant.tenant_id))
            events = await events_after(conn, tenant.tenant_id, leased.acked_seq, limit=limit + 1)
        signer = await ctx.keys.signer(conn, tenant.tenant_id, ctx.now())
    now = int(ctx.now().timestamp())
    sets: dict[str, str] = {}
    for event in events[:limit]:
        token = sign_set(event, issuer=tenant.issuer, audience=stream_id, key=signer.key, kid=signer.kid, now=now)
        if token is not None:
            sets[event.id] = token
    return Response({"sets": sets, "moreAvailable": len(events) > limit, "position": leased.acked_seq,
                     "lease": policy.lease, "state": "live"}, headers=NO_STORE)


def _behind(head: int) -> Response[Any]:
    """A stream a revoke marked behind: no SETs, no lease, until its receiver resyncs at ``head``."""
    return Response({"sets": {}, "moreAvailable": False, "position": head, "state": "behind"}, headers=NO_STORE)


routes: list[Any] = [configuration_path_inserted, configuration_appended, stream_create, stream_read, stream_poll]
