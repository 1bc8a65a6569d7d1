"""Who is calling the operations endpoint: the agent's DPoP-bound Session Token, checked as at
a company's API (PAP §4.3), then the Session's state from PostgreSQL. A PAP 1.0 caller
(a ``Poppy-Session`` header) is verified by :mod:`frontdoor_ledger.delegated_auth`.

The stateless checks are :func:`frontdoor_protocol.verify_resource_request`, the same code
the sdk runs at a company's API; the proof's ``jti`` is claimed once in Redis (RFC 9449
§11.1, failing closed); the Session must be live, the agent still allowed. The caller's
account and scopes are the Session's sign-in now, not what the token said when issued.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_identity import get_agent_policy, is_allowed
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

__all__ = ["Refused", "authenticate", "refusal"]

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


async def authenticate(ctx: LedgerContext, tenant: LedgerTenant,
                       request: Request[Any, Any, Any] | Inbound) -> CallerView:
    """The verified caller, or :class:`Refused`.

    ``request`` is a Litestar request or, from the lean confirm route, an :class:`Inbound`.

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
        try:
            first = await ctx.replay.claim("dpop-ledger", f"{tenant.tenant_id}:{proof.jkt}", proof.jti,
                                           ttl_s=max(int(proof.accept_until - now.timestamp()), 1))
        except Unavailable as exc:
            raise Refused(Response({"error": "temporarily_unavailable",
                                    "error_description": "Temporarily unavailable; retry shortly."},
                                   status_code=503, headers={**_NO_STORE, "Retry-After": str(exc.retry_after)})) from None
        if not first:
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "This DPoP proof was already used.")))
        session = await session_store.find_session(conn, tenant.tenant_id, claims.sid)
        if (session is None or not session.live or session.client_id != claims.client_id
                or session.user_id != claims.sub):
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The Session has ended.")))
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=claims.client_id)
        if not is_allowed(policy, claims.client_id):
            raise Refused(refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The Session has ended.")))
    signed_in = session.signed_in
    return CallerView(client_id=claims.client_id, user_id=claims.sub, session_id=session.id,
                      account=session.account_id if signed_in else None,
                      scopes=frozenset(parse_scope(session.scope or "")) if signed_in else frozenset())
