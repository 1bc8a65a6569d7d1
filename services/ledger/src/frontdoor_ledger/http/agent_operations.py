"""The operations endpoint agents call (Operations extension v1, §5–§6).

``GET {endpoint}/{id}``, ``POST {endpoint}/{id}/confirm`` ``{revision, approved_by}`` and
``POST {endpoint}/{id}/cancel``, where ``{endpoint}`` is ``{ledger}/{slug}/operations``,
each with the agent's DPoP-bound Session Token (draft 0.2) or its ``Poppy-Session`` JWT and,
when signed in, an access token (PAP 1.0, the same Ops v1 rules; ADR 0004 §9).

- Another user's operation and an unknown one are the same ``404 operation_not_found``;
  an account's operation in a signed-out Session is ``403 sign_in_required`` (OPS-3.2-01).
- Only the latest revision can be confirmed (``409 terms_changed`` with the current
  operation, OPS-3.1-01); a standing permission cannot confirm a revision needing the
  user's own approval (``403 user_approval_required``, OPS-5.1-05); the kind's scopes are
  needed (``403 insufficient_scope`` with ``scope``).
- A confirm or cancel of an operation no longer ``proposed`` answers it unchanged, ``200``;
  at most one confirm wins, by a compare-and-set (OPS-6-02). The winner waits up to
  ``FRONTDOOR_CONFIRM_WAIT`` for the perform webhook's outcome; without it the operation is
  ``in_progress`` with ``Retry-After`` (OPS-6-01), never ``failed`` on a guess (OPS-6-03).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from frontdoor_core.metrics import CONFIRMS
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_keys import shard
from frontdoor_operations import kinds, ledger
from frontdoor_operations.ledger import Operation, to_wire
from frontdoor_operations.rules import CallerView, cancel_decision, check_owner, confirm_decision, is_lapsed
from frontdoor_protocol import ErrorCode, ProtocolError
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath

from ..agent_auth import Refused, SessionLimit, authenticate, rate_limited, refusal, unavailable
from ..context import LedgerContext, LedgerTenant
from ..inbound import Inbound
from ..performer import RepriceUnavailable

__all__ = ["CONFIRM_PATH", "agent_confirm", "routes"]

_NO_STORE = {"Cache-Control": "no-store"}
REQUESTS_PER_NETWORK_PER_MINUTE = 3000
REQUESTS_PER_SESSION_PER_MINUTE = 600


def answer(ctx: LedgerContext, op: Operation) -> Response[Any]:
    """The operation, ``200``; ``Retry-After`` while it is in progress (OPS-6-01)."""
    headers = dict(_NO_STORE)
    if op.state == "in_progress":
        headers["Retry-After"] = str(ctx.settings.operation_retry_after)
    return Response(to_wire(op), status_code=200, headers=headers)


async def _limit(ctx: LedgerContext, key: str, limit: int) -> None:
    """PAP-4.3-18: too many requests are ``429 rate_limited`` with ``Retry-After``; fail closed."""
    try:
        allowed, retry = await hit(ctx.runtime.redis, key, limit=limit, window_s=60)
    except Exception:
        raise unavailable() from None
    if not allowed:
        raise rate_limited(retry)


async def _owned(ctx: LedgerContext, slug: str, operation_id: str,
                 request: Request[Any, Any, Any]) -> tuple[LedgerTenant, CallerView, Operation]:
    tenant, caller, op, _ = await _owned_with(ctx, slug, operation_id, request, targets=False)
    return tenant, caller, op


async def _owned_with(ctx: LedgerContext, slug: str, operation_id: str, request: Request[Any, Any, Any] | Inbound,
                      *, targets: bool) -> tuple[LedgerTenant, CallerView, Operation, kinds.ConfirmTargets | None]:
    """The caller and its operation; with ``targets``, what a confirm needs of the kind, read in the same statement."""
    inbound = request if isinstance(request, Inbound) else Inbound.of(request)
    # Before any lookup or signature check (the costly parts): per network, then per Session.
    network = inbound.network(ctx.settings.trusted_proxies)
    await _limit(ctx, f"ledger:net:{shard(slug[:64])}:{network}", REQUESTS_PER_NETWORK_PER_MINUTE)
    tenant = await ctx.tenant(slug)
    if tenant is None:
        raise Refused(refusal(ProtocolError(ErrorCode.OPERATION_NOT_FOUND, "No such operation.")))
    # Counted with the DPoP proof's jti claim, in one Redis round trip (the same ``ledger:ses`` counter).
    caller = await authenticate(ctx, tenant, inbound,
                                session_limit=SessionLimit("ledger:ses", REQUESTS_PER_SESSION_PER_MINUTE))
    confirm_targets: kinds.ConfirmTargets | None = None
    async with ctx.pool.acquire() as conn:
        if targets:
            found = await ledger.get_operation_to_confirm(conn, tenant.tenant_id, operation_id)
            op, confirm_targets = found if found is not None else (None, None)
        else:
            op = await ledger.get_operation(conn, tenant.tenant_id, operation_id)
    error = check_owner(op.view() if op is not None else None, caller)
    if error is not None:
        raise Refused(refusal(error, caller=caller))
    assert op is not None
    return tenant, caller, op, confirm_targets


async def _lapse(ctx: LedgerContext, tenant: LedgerTenant, op: Operation) -> Operation:
    """Expire a proposal whose time ran out, lazily (OPS-3.2-01), and answer the operation as it now is."""
    if not is_lapsed(op.view(), ctx.now()):
        return op
    async with ctx.pool.acquire() as conn:
        await ledger.expire(conn, tenant.tenant_id, op.id, now=ctx.now())
        current = await ledger.get_operation(conn, tenant.tenant_id, op.id)
    assert current is not None
    return current


@get("/{slug:str}/operations/{operation_id:str}")
async def read_operation(slug: FromPath[str], operation_id: FromPath[str], request: Request[Any, Any, Any],
                         state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    tenant, _, op = await _owned(ctx, slug, operation_id, request)
    return answer(ctx, await _lapse(ctx, tenant, op))


class _ConfirmBody(msgspec.Struct, frozen=True, kw_only=True):
    revision: Any = None
    approved_by: Any = None


def _terms_changed(op: Operation) -> Response[Any]:
    error = ProtocolError(ErrorCode.TERMS_CHANGED, "The terms changed: confirm the current revision.")
    return refusal(error, body_extra={"operation": to_wire(op)})


CONFIRM_PATH = "/{slug:str}/operations/{operation_id:str}/confirm"
"""The agent's confirm, served by :func:`confirm_operation` and by the lean route (:mod:`.lean_routes`)."""


@post(CONFIRM_PATH, status_code=200)
async def confirm_operation(slug: FromPath[str], operation_id: FromPath[str], request: Request[Any, Any, Any],
                            state: State) -> Response[Any]:
    return await agent_confirm(state.ctx, slug, operation_id, Inbound.of(request), request.body)


async def agent_confirm(ctx: LedgerContext, slug: str, operation_id: str, inbound: Inbound,
                        read_body: Callable[[], Awaitable[bytes]]) -> Response[Any]:
    """The agent's ``POST {endpoint}/{id}/confirm``, whichever entry point received it.

    The body is read only once the caller and its operation are known (``read_body``).

    Raises:
        Refused: the caller's refusals before its operation was read (rate limits,
            authentication, ownership), which the app's handler answers.
    """
    tenant, caller, op, targets = await _owned_with(ctx, slug, operation_id, inbound, targets=True)
    try:
        body = msgspec.json.decode(await read_body(), type=_ConfirmBody)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return refusal(ProtocolError(ErrorCode.INVALID_REQUEST, "The body must be {revision, approved_by}."))
    return await confirm_flow(ctx, tenant, caller, op, revision=body.revision, approved_by=body.approved_by,
                              via="agent", targets=targets)


async def confirm_flow(ctx: LedgerContext, tenant: LedgerTenant, caller: CallerView, op: Operation, *,
                       revision: object, approved_by: object, via: str,
                       targets: kinds.ConfirmTargets | None = None) -> Response[Any]:
    """The confirm, shared by the agent's endpoint and the company's website confirmation.

    Counted in ``frontdoor_confirms_total``: ``won`` for the confirm that took the operation
    (its perform webhook started), and every answer as ``answered``, ``refused`` or
    ``unavailable`` (503).
    """
    response = await _confirm(ctx, tenant, caller, op, revision=revision, approved_by=approved_by, via=via,
                              targets=targets)
    status = response.status_code or 200
    CONFIRMS.labels("answered" if status < 400 else "unavailable" if status == 503 else "refused").inc()
    return response


async def _confirm(ctx: LedgerContext, tenant: LedgerTenant, caller: CallerView, op: Operation, *,
                   revision: object, approved_by: object, via: str,
                   targets: kinds.ConfirmTargets | None) -> Response[Any]:
    decision = confirm_decision(op.view(), caller, revision=revision, approved_by=approved_by, now=ctx.now())
    if decision.action == "expire":
        return answer(ctx, await _lapse(ctx, tenant, op))
    if decision.action == "unchanged":
        return answer(ctx, op)
    if decision.action == "refuse":
        assert decision.error is not None
        if decision.error.code == ErrorCode.TERMS_CHANGED:
            return _terms_changed(op)
        return refusal(decision.error, caller=caller)
    if targets is None:  # not read with the operation (the company's website confirmation)
        async with ctx.pool.acquire() as conn:
            targets = await kinds.confirm_targets(conn, tenant.tenant_id, op.kind)  # perform and re-price endpoints
    if not targets.perform_enabled:  # its perform webhook is disabled: a confirm would wait with no one to perform it
        return refusal(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, "This cannot be confirmed right now; retry."),
                       headers={"Retry-After": "60"})
    try:
        repriced = (await ctx.performer.reprice(tenant.tenant_id, op, targets=targets)
                    if ctx.performer is not None else None)
    except RepriceUnavailable as exc:
        retry_after = ctx.settings.operation_retry_after if exc.retry_after is None else exc.retry_after
        return refusal(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, "Current terms are not available; retry."),
                       headers={"Retry-After": str(retry_after)})
    if repriced is not None:
        return _terms_changed(repriced)
    async with ctx.pool.acquire() as conn:
        if ctx.performer is not None:  # its perform message written claimed for the fast path's attempt
            current, message_id, claim = await ledger.confirm_claimed(
                conn, tenant.tenant_id, op.id, revision=op.revision,
                approved_by=approved_by,  # type: ignore[arg-type]
                via=via,  # type: ignore[arg-type]
                now=ctx.now(), lease=ctx.performer.lease, account=caller.account)
        else:
            current, message_id = await ledger.confirm(conn, tenant.tenant_id, op.id, revision=op.revision,
                                                       approved_by=approved_by,  # type: ignore[arg-type]
                                                       via=via,  # type: ignore[arg-type]
                                                       now=ctx.now(), account=caller.account)
            claim = None
    if message_id is None:
        # Another confirm won (or the proposal changed or lapsed meanwhile): answer what is.
        if current.state == "proposed" and current.revision != op.revision:
            return _terms_changed(current)
        return answer(ctx, await _lapse(ctx, tenant, current))
    CONFIRMS.labels("won").inc()
    if ctx.performer is not None:
        settled = await ctx.performer.perform_and_wait(tenant.tenant_id, current.id, message_id, claim=claim)
        if settled is not None:
            current = settled
    return answer(ctx, current)


@post("/{slug:str}/operations/{operation_id:str}/cancel", status_code=200)
async def cancel_operation(slug: FromPath[str], operation_id: FromPath[str], request: Request[Any, Any, Any],
                           state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    tenant, _, op = await _owned(ctx, slug, operation_id, request)
    decision = cancel_decision(op.view(), ctx.now())
    if decision.action == "expire":
        return answer(ctx, await _lapse(ctx, tenant, op))
    if decision.action == "cancel":
        async with ctx.pool.acquire() as conn:
            await ledger.cancel(conn, tenant.tenant_id, op.id, now=ctx.now())
            current = await ledger.get_operation(conn, tenant.tenant_id, op.id)
        assert current is not None
        return answer(ctx, current)
    return answer(ctx, op)


routes = [read_operation, confirm_operation, cancel_operation]
