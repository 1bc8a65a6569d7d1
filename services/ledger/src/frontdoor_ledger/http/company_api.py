"""The ledger API a company calls (``{ledger}/{slug}/v1/operations``), with its resource-server credential.

Propose, revise, report an outcome, read, list, and confirm from the company's own website.
docs/operations.md is the reference; the OpenAPI description is at ``{ledger}/openapi.json``.
Every refusal is RFC 9457 ``application/problem+json`` (``code`` the stable error code, as
in the management API); nothing echoes the request.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from frontdoor_core.errors import Conflict, DomainError, Invalid, NotFound
from frontdoor_identity import ClientResolutionError
from frontdoor_operations import ledger
from frontdoor_operations.ledger import ListFilters, Operation, Proposal, to_wire
from frontdoor_operations.rules import CallerView, check_owner, is_lapsed
from frontdoor_protocol import parse_scope
from frontdoor_sessions import identify_credential, session_store
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import FromPath, Parameter

from ..agent_auth import Refused
from ..context import LedgerContext, LedgerTenant
from .agent_operations import confirm_flow
from .problems import COMPANY_STATUS, as_company_problem, company_problem, is_company_path

__all__ = ["agent_domain_error", "domain_error", "routes"]

_NO_STORE = {"Cache-Control": "no-store"}
_SAFE_PATH = re.compile(r"\$(\.[a-z_]{1,40}|\[[0-9]{1,6}\])*")
_LIMIT = re.compile(r"[0-9]{1,3}")
_AGENT_SID = re.compile(r"[A-Za-z0-9_-]{1,256}")  # a 1.0 sid [Q14]
_OLDEST = datetime(2000, 1, 1, tzinfo=UTC)
OPERATIONS_EXTENSION = "operations"
OPERATIONS_VERSION = "1"


def _error(status: int, code: str, description: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return company_problem(status, code, description, headers)


def domain_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """The app's handler for a use case's refusal, with its status: a problem on the ledger API,
    ``{"error", "error_description"}`` at the agents' endpoints."""
    assert isinstance(exc, DomainError)
    if not is_company_path(request.url.path):
        return agent_domain_error(exc)
    retry = getattr(exc, "retry_after", None)
    return _error(COMPANY_STATUS.get(exc.kind, 400), exc.code, exc.detail,
                  {"Retry-After": str(retry)} if retry is not None else None)


def agent_domain_error(exc: DomainError) -> Response[Any]:
    """A use case's refusal at the agents' endpoints: ``{"error", "error_description"}``, its status."""
    retry = getattr(exc, "retry_after", None)
    return Response({"error": exc.code, "error_description": exc.detail}, status_code=COMPANY_STATUS.get(exc.kind, 400),
                    headers={**_NO_STORE, **({"Retry-After": str(retry)} if retry is not None else {})})


async def provide_company(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> LedgerTenant:
    """The tenant at ``slug`` whose resource-server credential the request carries, else a 401 refusal."""
    ctx: LedgerContext = state.ctx
    tenant = await ctx.tenant(slug)
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    cred_id = None
    if tenant is not None and scheme.lower() == "bearer" and credential.strip():
        async with ctx.pool.acquire() as conn:
            cred_id = await identify_credential(conn, tenant.tenant_id, credential.strip())
    if tenant is None or cred_id is None:
        raise Refused(_error(401, "invalid_client", "Authenticate with a resource-server credential of this tenant.",
                             {"WWW-Authenticate": 'Bearer realm="frontdoor-ledger"'}))
    return tenant


_COMPANY = {"company": Provide(provide_company)}


def _company_view(op: Operation) -> dict[str, Any]:
    return {
        "operation": to_wire(op),
        "details": {
            "kind": op.kind, "client_id": op.client_id, "user_id": op.user_id, "account": op.account_id,
            "session_id": op.session_id, "action_key": op.action_key, "input": op.input,
            "confirmed_via": op.confirmed_via, "needs_attention": op.attention is not None,
            "attention_reason": op.attention,
            "sequence": op.sequence, "created_at": op.created_at.isoformat(), "updated_at": op.updated_at.isoformat(),
        },
    }


class CallerRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The caller the company verified.

    ``session_id`` is Frontdoor's ``ses_...`` ID under both profiles (the sdk's
    ``Caller.frontdoor_session_id``); for a 1.0 Session the ``sid`` its agent chose is
    accepted too (unique per ``client_id``). Under 1.0 a Session is not signed in itself: the
    request's access token is, so the company passes that token's ``account`` (ADR 0004 §9);
    under 0.2 the account is the Session's own sign-in and ``account``, if sent, must match it.
    """

    session_id: str
    client_id: str
    user_id: str
    account: str | None = None


class ProposeBody(Proposal, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A proposal (`Proposal`'s members) and the Session the company verified."""

    caller: CallerRef


def _decode(raw: bytes, typ: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=typ)
    except msgspec.ValidationError as exc:
        # Name where, never what: msgspec's text quotes the input (an unknown member's name).
        _, _, where = str(exc).rpartition(" - at `")
        path = where.rstrip("`") if where and _SAFE_PATH.fullmatch(where.rstrip("`")) else "$"
        raise Invalid("invalid_request", f"The body does not fit the schema at {path}.") from None
    except msgspec.DecodeError:
        raise Invalid("invalid_request", "The body must be a JSON object.") from None


async def _live_session(ctx: LedgerContext, tenant: LedgerTenant, session_id: str, *,
                        client_id: str | None = None) -> Any:
    """The live Session by Frontdoor's ``ses_`` ID, or (given the agent) a 1.0 Session by the ``sid`` it chose."""
    async with ctx.pool.acquire() as conn:
        session = (await session_store.find_session(conn, tenant.tenant_id, session_id)
                   if ledger.is_operation_id(session_id) else None)  # the same ID alphabet
        if (client_id is not None and (session is None or session.client_id != client_id)
                and _AGENT_SID.fullmatch(session_id)):
            session = await session_store.find_delegated_session(conn, tenant.tenant_id, client_id, session_id)
    if session is None or not session.live:
        raise Conflict("session_inactive", "That Session is not a live Session of this tenant.")
    return session


def _owner_account(session: Any, caller: CallerRef) -> str | None:
    """The account a proposal binds to: the 1.0 request's token account, or the 0.2 Session's sign-in."""
    if session.profile == "1.0":
        return caller.account
    account: str | None = session.account_id if session.signed_in else None
    if caller.account is not None and caller.account != account:
        raise Conflict("session_inactive", "That Session is not signed in to that account.")
    return account


async def _supports_operations(ctx: LedgerContext, client_id: str) -> bool:
    """OPS-2-01: whether the agent lists the operations extension, version 1."""
    try:
        client = await ctx.directory.get_client(client_id)
    except ClientResolutionError:
        return False
    return bool(client.metadata.extension_version(OPERATIONS_EXTENSION) == OPERATIONS_VERSION)


@post("/{slug:str}/v1/operations", status_code=201, dependencies=_COMPANY)
async def propose(company: LedgerTenant, request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    body: ProposeBody = _decode(await request.body(), ProposeBody)
    session = await _live_session(ctx, company, body.caller.session_id, client_id=body.caller.client_id)
    if session.client_id != body.caller.client_id or session.user_id != body.caller.user_id:
        raise Conflict("session_inactive", "That Session is not this agent's and user's.")
    if not await _supports_operations(ctx, session.client_id):
        return _error(403, "extension_required", "The agent does not support the operations extension.")
    owner = CallerView(client_id=session.client_id, user_id=session.user_id, session_id=session.id,
                       account=_owner_account(session, body.caller))
    async with ctx.pool.acquire() as conn:
        op, created = await ledger.propose(conn, company.tenant_id, owner, body, now=ctx.now(),
                                           allow_http_loopback=ctx.settings.is_dev)
    return Response({"operation": to_wire(op)}, status_code=201 if created else 200, headers=_NO_STORE)


class ReviseBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    summary: str
    terms: dict[str, Any] | None = None
    user_approval_required: bool | None = None
    expires_in: int | None = None


@post("/{slug:str}/v1/operations/{operation_id:str}/revisions", status_code=200, dependencies=_COMPANY)
async def revise(company: LedgerTenant, operation_id: FromPath[str], request: Request[Any, Any, Any],
                 state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    body: ReviseBody = _decode(await request.body(), ReviseBody)
    async with ctx.pool.acquire() as conn:
        op = await ledger.revise(conn, company.tenant_id, operation_id, summary=body.summary, terms=body.terms,
                                 user_approval_required=body.user_approval_required,
                                 expires_in=body.expires_in, now=ctx.now())
    return Response({"operation": to_wire(op)}, status_code=200, headers=_NO_STORE)


class OutcomeBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    outcome: str
    result: dict[str, Any]


@post("/{slug:str}/v1/operations/{operation_id:str}/outcome", status_code=200, dependencies=_COMPANY)
async def report_outcome(company: LedgerTenant, operation_id: FromPath[str], request: Request[Any, Any, Any],
                         state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    body: OutcomeBody = _decode(await request.body(), OutcomeBody)
    async with ctx.pool.acquire() as conn:
        op, changed = await ledger.record_outcome(conn, company.tenant_id, operation_id, outcome=body.outcome,
                                                  result=body.result, now=ctx.now())
    if changed:
        await ctx.settled(op.id)
    return Response({"operation": to_wire(op)}, status_code=200, headers=_NO_STORE)


@get("/{slug:str}/v1/operations/{operation_id:str}", dependencies=_COMPANY)
async def read(company: LedgerTenant, operation_id: FromPath[str], state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    async with ctx.pool.acquire() as conn:
        op = await ledger.get_operation(conn, company.tenant_id, operation_id)
        if op is not None and is_lapsed(op.view(), ctx.now()):
            await ledger.expire(conn, company.tenant_id, op.id, now=ctx.now())
            op = await ledger.get_operation(conn, company.tenant_id, operation_id)
    if op is None:
        return _error(404, "operation_not_found", "No such operation.")
    return Response(_company_view(op), status_code=200, headers=_NO_STORE)


_STATES = ("proposed", "in_progress", "succeeded", "failed", "cancelled", "expired")


def _cursor(op: Operation) -> str:
    raw = f"{op.created_at.isoformat()}|{op.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_cursor(value: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        at, _, op_id = raw.partition("|")
        parsed = datetime.fromisoformat(at)
    except (ValueError, UnicodeDecodeError):
        raise Invalid("invalid_cursor", "cursor is not one this API gave.") from None
    if parsed.tzinfo is None or not _OLDEST <= parsed <= datetime(9000, 1, 1, tzinfo=UTC) \
            or not ledger.is_operation_id(op_id):
        raise Invalid("invalid_cursor", "cursor is not one this API gave.")
    return parsed, op_id


def _time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Invalid("invalid_request", f"{name} must be an ISO 8601 time.") from None
    if parsed.tzinfo is None:
        raise Invalid("invalid_request", f"{name} must include a timezone.")
    if not _OLDEST <= parsed <= datetime(9000, 1, 1, tzinfo=UTC):
        raise Invalid("invalid_request", f"{name} is out of range.")
    return parsed


@get("/{slug:str}/v1/operations", dependencies=_COMPANY)
async def list_all(company: LedgerTenant, request: Request[Any, Any, Any], state: State, *,
                   state_filter: Annotated[str | None, Parameter(query="state")] = None,
                   kind: str | None = None, account: str | None = None, client_id: str | None = None,
                   since: str | None = None, until: str | None = None, limit: str | None = None,
                   cursor: str | None = None, needs_attention: str | None = None) -> Response[Any]:
    """``state``, ``kind``, ``account``, ``client_id``, ``since``/``until`` (ISO 8601 with a zone),
    ``needs_attention=true``, ``limit`` (1-200, default 50), ``cursor`` (a ``next_cursor``)."""
    ctx: LedgerContext = state.ctx
    if any("\x00" in value or len(value) > 2048 for value in request.query_params.values()):
        raise Invalid("invalid_request", "A query parameter is not acceptable.")
    if state_filter is not None and state_filter not in _STATES:
        raise Invalid("invalid_request", "state must be one of " + ", ".join(_STATES) + ".")
    limit_text = "50" if limit is None else limit
    if not _LIMIT.fullmatch(limit_text) or not 1 <= int(limit_text) <= 200:
        raise Invalid("invalid_request", "limit must be 1 to 200.")
    filters = ListFilters(state=state_filter, kind=kind, account=account, client_id=client_id,
                          since=_time(since, "since"), until=_time(until, "until"),
                          attention=needs_attention == "true" or None)
    before = _parse_cursor(cursor) if cursor else None
    count = int(limit_text)
    async with ctx.pool.acquire() as conn:
        ops = await ledger.list_operations(conn, company.tenant_id, filters, limit=count + 1, before=before)
    more = len(ops) > count
    ops = ops[:count]
    return Response({"items": [_company_view(op) for op in ops],
                     "next_cursor": _cursor(ops[-1]) if more and ops else None},
                    status_code=200, headers=_NO_STORE)


class WebConfirmBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    revision: int
    session_id: str
    approved_by: Literal["user"] = "user"


@post("/{slug:str}/v1/operations/{operation_id:str}/confirm", status_code=200, dependencies=_COMPANY)
async def confirm_on_website(company: LedgerTenant, operation_id: FromPath[str], request: Request[Any, Any, Any],
                             state: State) -> Response[Any]:
    """The user confirmed on the company's own page, in the agent's Session (Operations §4.4)."""
    ctx: LedgerContext = state.ctx
    body: WebConfirmBody = _decode(await request.body(), WebConfirmBody)
    session = await _live_session(ctx, company, body.session_id)
    async with ctx.pool.acquire() as conn:
        op = await ledger.get_operation(conn, company.tenant_id, operation_id)
    caller = CallerView(client_id=session.client_id, user_id=session.user_id, session_id=session.id,
                        account=session.account_id if session.signed_in else None,
                        scopes=frozenset(parse_scope(session.scope or "")) if session.signed_in else frozenset())
    if op is None or check_owner(op.view(), caller) is not None:
        raise NotFound("operation_not_found", "No such operation in that Session.")
    response = await confirm_flow(ctx, company, caller, op, revision=body.revision, approved_by=body.approved_by,
                                  via="website")
    if response.status_code == 200 and isinstance(response.content, dict):
        return Response({"operation": response.content}, status_code=200, headers=dict(response.headers))
    return as_company_problem(response)


routes = [propose, revise, report_outcome, read, list_all, confirm_on_website]
