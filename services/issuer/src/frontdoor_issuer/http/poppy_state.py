"""``POST {issuer}/poppy/agent-keys`` and ``POST {issuer}/poppy/session-state``: what the
company's sdk asks Frontdoor about a PAP 1.0 request (ADR 0004 §6).

The sdk verifies every signature itself; it asks only for what needs Frontdoor's state,
authenticated with its resource-server credential exactly as at introspection. Both
answer only while the tenant serves 1.0 (else the issuer's one 404), take strict JSON
bodies (unknown or repeated members refused), answer ``Cache-Control: no-store`` and
echo nothing from the request.

- ``agent-keys`` ``{"client_id", "refresh"?}``: the agent's identity keys, loaded with
  the 1.0 rules (`frontdoor_identity.DelegatedKeyDirectory`) after the tenant's agent
  policy. ``200 {"client_id", "keys", "max_age"}``; ``403 invalid_client`` for a refused
  agent or a broken document; ``503`` + ``Retry-After`` when the keys cannot be loaded.
- ``session-state`` ``{"client_id", "sid", "sub", "agent_id"?, "jti", "iat", "sgn"?}``:
  the agent policy, the ``jti`` claim (replay), the Session (created at first sight or
  checked) and the grant family. ``200 {"state", "session"?, "signed_in", "account"?,
  "scope"?}`` with ``state`` one of ``active``, ``ended``, ``mismatch``, ``replayed``,
  ``refused``. A Session seen for the first time lists its agent among the tenant's agents
  (the dashboard), as the 0.2 Session grant does, at most once a minute per agent. While
  the tenant may not start new Sessions (billing, docs/billing.md) an unknown Session is
  ``503 temporarily_unavailable`` with ``Retry-After`` and not written; known ones are answered.

Each endpoint is rate limited per resource-server credential (one-minute windows:
`AGENT_KEYS_PER_CREDENTIAL_PER_MINUTE`, `SESSION_STATE_PER_CREDENTIAL_PER_MINUTE`); past
the limit the answer is ``429 {"error": "rate_limited"}`` with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, TypeVar

import msgspec
from frontdoor_core.errors import Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_keys import shard
from frontdoor_httpkit import BadBody, read_json
from frontdoor_identity import (
    ClientResolutionError,
    InvalidClientMetadata,
    get_agent_policy,
    is_allowed,
    record_seen_delegated,
)
from frontdoor_sessions import AgentRefused, ReplayCache, accepted_agent_keys, authenticate_credential
from frontdoor_sessions.delegated_sessions import claim_session_jti, observe_delegated_session
from frontdoor_sessions.throttle import Throttle
from frontdoor_sessions.token_endpoint import TenantIssuer
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .oauth_errors import NO_STORE, unavailable

__all__ = [
    "AGENT_KEYS_PER_CREDENTIAL_PER_MINUTE",
    "SESSION_STATE_PER_CREDENTIAL_PER_MINUTE",
    "agent_keys",
    "routes",
    "session_state",
]

AGENT_KEYS_PER_CREDENTIAL_PER_MINUTE = 600
"""Key loads per resource-server credential and minute (the sdk caches keys for ``max_age``)."""
SESSION_STATE_PER_CREDENTIAL_PER_MINUTE = 20_000
"""Session-state questions per resource-server credential and minute (one per 1.0 request)."""
_SEEN = Throttle(60.0)  # per process: a 1.0 agent is listed at first sight, then at most once a minute

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-poppy"'}
_MAX_BODY = 8192
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,256}$")  # sid and sub [Q14]
_PRINTABLE = re.compile(r"^[\x20-\x7e]{1,256}$")  # agent_id, jti
_KEYS_RETRY_AFTER = 30
_SESSION_MAX_AGE = 60

T = TypeVar("T")


class AgentKeysRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    client_id: str
    refresh: bool = False


class SessionStateRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    client_id: str
    sid: str
    sub: str
    jti: str
    iat: int
    agent_id: str | None = None
    sgn: str | None = None

    def problem(self) -> bool:
        """Whether a member breaks the shapes the verified Session JWT has (ADR 0004 §3)."""
        return (not _NAME.fullmatch(self.sid) or not _NAME.fullmatch(self.sub) or not _PRINTABLE.fullmatch(self.jti)
                or (self.agent_id is not None and not _PRINTABLE.fullmatch(self.agent_id))
                or (self.sgn is not None and not _PRINTABLE.fullmatch(self.sgn))
                or not self.client_id.startswith(("https://", "http://")) or len(self.client_id) > 2048)


def _error(code: str, status: int, description: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response({"error": code, "error_description": description}, status_code=status,
                    headers={**NO_STORE, **(headers or {})})


async def _limited(state: State, tenant: TenantIssuer, credential: str, *, endpoint: str, limit: int
                   ) -> Response[Any] | None:
    """Count one call of the credential; the 429 to send past ``limit``, else None."""
    digest = hashlib.sha256(credential.encode()).hexdigest()[:32]
    try:
        allowed, reset = await hit(state.ctx.redis, f"poppy:{endpoint}:{shard(tenant.tenant_id)}:{digest}", limit=limit,
                                   window_s=60)
    except Exception:
        return unavailable(5)
    if allowed:
        return None
    return _error("rate_limited", 429, "Too many requests; retry later.", {
        "Retry-After": str(reset),
        "RateLimit-Policy": f'"poppy-{endpoint}";q={limit};w=60',
        "RateLimit": f'"poppy-{endpoint}";r=0;t={reset}',
    })


async def _caller(slug: str, request: Request[Any, Any, Any], state: State, into: type[T], *, endpoint: str,
                  limit: int) -> tuple[TenantIssuer, T] | Response[Any]:
    """The tenant (serving 1.0) and the body, from a request with a live resource-server credential
    within its rate limit."""
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None or not tenant.settings.protocol.serves("1.0"):
        return not_found()
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    async with ctx.pool.acquire() as conn:
        if scheme.lower() != "bearer" or not await authenticate_credential(conn, tenant.tenant_id, credential.strip()):
            return _error("invalid_client", 401, "Authenticate with a resource-server credential.", _CHALLENGE)
    refused = await _limited(state, tenant, credential.strip(), endpoint=endpoint, limit=limit)
    if refused is not None:
        return refused
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > _MAX_BODY):
        return _error("invalid_request", 400, "The body is too large.")
    try:
        body = await read_json(request, into)
    except BadBody:
        return _error("invalid_request", 400, "The body is not the JSON object this endpoint takes.")
    return tenant, body


@post("/{slug:str}/poppy/agent-keys", status_code=200)
async def agent_keys(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    checked = await _caller(slug, request, state, AgentKeysRequest, endpoint="agent-keys",
                            limit=AGENT_KEYS_PER_CREDENTIAL_PER_MINUTE)
    if isinstance(checked, Response):
        return checked
    tenant, body = checked
    ctx = state.ctx
    try:
        keys = await accepted_agent_keys(ctx.pool, state.agent_keys, tenant.tenant_id, body.client_id,
                                         refresh=body.refresh)
    except AgentRefused:
        return _error("invalid_client", 403, "This agent is not accepted here.")
    except InvalidClientMetadata:
        return _error("invalid_client", 403, "The agent's metadata or keys break the rules.")
    except ClientResolutionError:
        return _error("temporarily_unavailable", 503, "The agent's keys cannot be loaded; retry shortly.",
                      {"Retry-After": str(_KEYS_RETRY_AFTER)})
    now: datetime = ctx.now()
    max_age = max(0, int((keys.expires_at - now).total_seconds()))
    return Response({"client_id": keys.client_id, "keys": keys.public_jwks(), "max_age": max_age}, status_code=200,
                    headers=NO_STORE)


@post("/{slug:str}/poppy/session-state", status_code=200)
async def session_state(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    checked = await _caller(slug, request, state, SessionStateRequest, endpoint="session-state",
                            limit=SESSION_STATE_PER_CREDENTIAL_PER_MINUTE)
    if isinstance(checked, Response):
        return checked
    tenant, body = checked
    if body.problem():
        return _error("invalid_request", 400, "A member does not have the shape of a verified Session JWT's claim.")
    ctx = state.ctx
    now: datetime = ctx.now()
    async with ctx.pool.acquire() as conn:
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=body.client_id)
        if not is_allowed(policy, body.client_id):
            return Response({"state": "refused", "signed_in": False}, status_code=200, headers=NO_STORE)
        try:
            first = await claim_session_jti(ReplayCache(ctx.redis), tenant_id=tenant.tenant_id,
                                            client_id=body.client_id, jti=body.jti, iat=body.iat,
                                            now=int(now.timestamp()), max_age=_SESSION_MAX_AGE)
        except Unavailable as exc:
            return unavailable(exc.retry_after)
        if not first:
            return Response({"state": "replayed", "signed_in": False}, status_code=200, headers=NO_STORE)
        # Billing (docs/billing.md): a suspended tenant's known Sessions are answered, a new one is not written.
        refused: int | None = await state.session_admission.refused(tenant.tenant_id)
        try:
            seen = await observe_delegated_session(conn, tenant.tenant_id, client_id=body.client_id, sid=body.sid,
                                                   sub=body.sub, agent_id=body.agent_id, now=now, sgn=body.sgn,
                                                   create=refused is None)
        except LookupError:
            if refused is None:
                raise
            return _error("temporarily_unavailable", 503, "New Sessions cannot start here right now.",
                          {"Retry-After": str(refused)})
        if seen.state == "active" and _SEEN.due((tenant.tenant_id, body.client_id)):
            await record_seen_delegated(conn, tenant.tenant_id, body.client_id,
                                        name=await _agent_name(state, body.client_id), now=now)
    out: dict[str, Any] = {"state": seen.state, "session": seen.session_id, "signed_in": seen.signed_in}
    if seen.signed_in:
        out["account"] = seen.account
        out["scope"] = seen.scope
    return Response(out, status_code=200, headers=NO_STORE)


async def _agent_name(state: State, client_id: str) -> str | None:
    """The agent's display name from its (normally cached) keys; None when they cannot load now."""
    try:
        keys = await state.agent_keys.get_keys(client_id)
    except (ClientResolutionError, InvalidClientMetadata):
        return None
    name: str | None = keys.client_name
    return name


routes = [agent_keys, session_state]
