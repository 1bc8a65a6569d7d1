"""Who is calling the operations endpoint: the agent's DPoP-bound Session Token, checked as at
a company's API (PAP §4.3), then the Session's state from PostgreSQL. A PAP 1.0 caller
(a ``Poppy-Session`` header) is verified by :mod:`frontdoor_ledger.delegated_auth`.

The stateless checks are :func:`frontdoor_protocol.verify_resource_request`, the same code
the sdk runs at a company's API; the proof's ``jti`` is claimed once in Redis (RFC 9449
§11.1, failing closed); the Session must be live, the agent still allowed. The caller's
account and scopes are the Session's sign-in now, not what the token said when issued.

A caller given a :class:`SessionLimit` also counts the request against its Session's
fixed-window budget (PAP-4.3-18). For a draft 0.2 caller that count is sent with the ``jti``
claim in one Redis script (both keys carry the tenant's hash tag, so one Cluster slot): one
round trip instead of two, and a replayed proof is refused without being counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_core.rate_limit import hit, window_key
from frontdoor_core.redis_keys import shard
from frontdoor_operations.rules import CallerView
from frontdoor_protocol import (
    ChallengeScheme,
    ErrorCode,
    ProtocolError,
    Surface,
    UnknownKeyId,
    parse_scope,
    verify_resource_request,
)
from frontdoor_sessions import session_store
from litestar import Request, Response

from .context import LedgerContext, LedgerTenant
from .delegated_auth import DelegatedCallerView, authenticate_delegated, delegated_refusal
from .inbound import Inbound

__all__ = ["Refused", "SessionLimit", "authenticate", "rate_limited", "refusal", "unavailable"]

_NO_STORE = {"Cache-Control": "no-store"}


class Refused(Exception):
    """Answer with ``response`` instead of serving the request."""

    def __init__(self, response: Response[Any]) -> None:
        super().__init__("refused")
        self.response = response


def refusal(error: ProtocolError, *, body_extra: dict[str, Any] | None = None,
            headers: dict[str, str] | None = None, caller: CallerView | None = None) -> Response[Any]:
    """A resource-surface refusal: status, ``WWW-Authenticate`` when challenged, JSON body.

    A 1.0 ``caller`` gets the 1.0 rendering (ADR 0004 §7): the challenge of its token's scheme.
    """
    if isinstance(caller, DelegatedCallerView):
        return delegated_refusal(error, scheme=caller.scheme, body_extra=body_extra, headers=headers)
    out = {"Content-Type": "application/json", **_NO_STORE, **(headers or {})}
    if error.entry.challenged:
        challenge = error.challenge(ChallengeScheme.DPOP, algs=("ES256",))
        if challenge:
            out["WWW-Authenticate"] = challenge
    return Response({**error.to_body(), **(body_extra or {})}, status_code=error.status_at(Surface.RESOURCE),
                    headers=out)


@dataclass(frozen=True, slots=True)
class SessionLimit:
    """A per-Session request budget: ``limit`` requests per ``window_s``, counted under ``prefix``."""

    prefix: str
    limit: int
    window_s: int = 60

    def key(self, tenant_id: str, session_id: str) -> str:
        """The counter's name (``rate_limit.window_key`` adds the window): tagged by the tenant."""
        return f"{self.prefix}:{shard(tenant_id)}:{session_id}"


def rate_limited(retry_after: int) -> Refused:
    """PAP-4.3-18: ``429 rate_limited`` with ``Retry-After``, the seconds left in the window."""
    return Refused(refusal(ProtocolError(ErrorCode.RATE_LIMITED, "Too many requests; retry later."),
                           headers={"Retry-After": str(retry_after)}))


def unavailable() -> Refused:
    """A limit Redis cannot count now: ``503`` (failing closed)."""
    return Refused(refusal(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, "Temporarily unavailable."),
                           headers={"Retry-After": "5"}))


async def authenticate(ctx: LedgerContext, tenant: LedgerTenant, request: Request[Any, Any, Any] | Inbound,
                       *, session_limit: SessionLimit | None = None) -> CallerView:
    """The verified caller, or :class:`Refused`.

    ``request`` is a Litestar request or, from the lean confirm route, an :class:`Inbound`.
    ``session_limit``: also count the request against the caller's Session (PAP-4.3-18);
    over it, ``429 rate_limited`` (a draft 0.2 caller's before its Session is read).

    A request with a ``Poppy-Session`` header is a PAP 1.0 request (ADR 0004 §9,
    :mod:`frontdoor_ledger.delegated_auth`); any other is a draft 0.2 one.

    Raises:
        Refused: ``invalid_token`` / ``invalid_dpop_proof`` (401), or 503 when Redis is away;
            under 1.0 also ``invalid_session`` / ``session_ended`` (400).
    """
    now = ctx.now()
    inbound = request if isinstance(request, Inbound) else Inbound.of(request)
    headers = inbound.headers
    url = inbound.url(ctx.settings.ledger_base_url)
    if any(name.lower() == "poppy-session" for name, _ in headers):
        verified_1_0 = await authenticate_delegated(ctx, tenant, inbound, url=url)
        if isinstance(verified_1_0, Response):
            raise Refused(verified_1_0)
        if session_limit is not None:
            try:
                allowed, retry = await hit(ctx.runtime.redis, session_limit.key(tenant.tenant_id,
                                                                                verified_1_0.session_id),
                                           limit=session_limit.limit, window_s=session_limit.window_s)
            except Exception:
                raise unavailable() from None
            if not allowed:
                raise rate_limited(retry)
        return verified_1_0
    async with ctx.pool.acquire() as conn:
        try:
            keys = await ctx.keys.keyset(conn, tenant.tenant_id, now)
            try:
                verified = verify_resource_request(method=inbound.method, url=url, headers=headers, keys=keys,
                                                   issuer=tenant.issuer, now=int(now.timestamp()),
                                                   signatures=ctx.signatures)
            except UnknownKeyId:
                keys = await ctx.keys.keyset(conn, tenant.tenant_id, now, refresh=True)
                verified = verify_resource_request(method=inbound.method, url=url, headers=headers, keys=keys,
                                                   issuer=tenant.issuer, now=int(now.timestamp()))
        except ProtocolError as error:
            raise Refused(refusal(error)) from None
        except ValueError:  # a request URL no proof can match (control characters)
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "The DPoP proof does not match."))) \
                from None
        claims = verified.claims
        if verified.scheme != ChallengeScheme.DPOP or verified.proof is None or claims.resource is not None:
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "Use a DPoP-bound Session Token.")))
        proof = verified.proof
        scope, ttl_s = f"{tenant.tenant_id}:{proof.jkt}", max(int(proof.accept_until - now.timestamp()), 1)
        count: tuple[int, int] | None = None
        try:
            if session_limit is None:
                first = await ctx.replay.claim("dpop-ledger", scope, proof.jti, ttl_s=ttl_s)
            else:
                # The same counter as `hit` (window_key), counted only when the proof is fresh.
                counter = window_key(session_limit.key(tenant.tenant_id, claims.sid), session_limit.window_s)
                fresh, count = await ctx.replay.claim_all_then_count([("dpop-ledger", scope, proof.jti, ttl_s)],
                                                                     counter)
                first = fresh[0]
        except Unavailable as exc:
            raise Refused(Response({"error": "temporarily_unavailable",
                                    "error_description": "Temporarily unavailable; retry shortly."},
                                   status_code=503, headers={**_NO_STORE, "Retry-After": str(exc.retry_after)})) from None
        if not first:
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "This DPoP proof was already used.")))
        if session_limit is not None and count is not None and count[0] > session_limit.limit:
            raise rate_limited(max(count[1], 1))
        # The Session and the agent policy in one statement: none when either refuses.
        session = await session_store.find_session_of_allowed_agent(conn, tenant.tenant_id, claims.sid,
                                                                    claims.client_id)
        if (session is None or not session.live or session.client_id != claims.client_id
                or session.user_id != claims.sub):
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The Session has ended.")))
    signed_in = session.signed_in
    return CallerView(client_id=claims.client_id, user_id=claims.sub, session_id=session.id,
                      account=session.account_id if signed_in else None,
                      scopes=frozenset(parse_scope(session.scope or "")) if signed_in else frozenset())
