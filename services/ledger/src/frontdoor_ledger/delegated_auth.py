"""A PAP 1.0 caller at the operations endpoint: a ``Poppy-Session`` JWT, and an access token when signed in.

ADR 0004 §3, §6, §7, §9. The request is verified and its Session observed by
:class:`frontdoor_sessions.DelegatedCallers`, the use case every Frontdoor surface taking a
``Poppy-Session`` header runs (the agent's identity keys after the tenant's agent policy,
the pure checks of [S §3], the ``jti`` claimed once, the Session at (tenant, ``client_id``,
``sid``) created or checked, the access token's sign-in still live). This module keeps only
the ledger's side: one instance per process with the process's :class:`DelegationCache`
(:func:`delegated_callers`), and the answers.

Answers: Session failures ``400 invalid_session`` / ``400 session_ended`` with no challenge;
token failures the OAuth challenge of the scheme used (``401 invalid_token``); keys or
state that cannot be read, ``503`` with ``Retry-After``. The Ops v1 rules are applied to the
returned :class:`DelegatedCallerView` unchanged: the operation's owner is (``client_id``,
``sub``), its account the access token's.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_operations.rules import CallerView
from frontdoor_protocol import (
    ChallengeScheme,
    DelegationCache,
    ErrorCode,
    ProtocolError,
    Surface,
    parse_scope,
)
from frontdoor_sessions import Admission, DelegatedCallers, DelegatedRefusal, NewSessionRefused
from litestar import Response

from .context import LedgerContext, LedgerTenant
from .inbound import Inbound

__all__ = ["DelegatedCallerView", "authenticate_delegated", "delegated_callers", "delegated_refusal"]

_NO_STORE = {"Cache-Control": "no-store"}
_SESSION_CODES = frozenset({ErrorCode.INVALID_SESSION, ErrorCode.SESSION_ENDED})
_DPOP_NAMESPACE = "dpop-ledger"  # the ledger's DPoP proofs, 0.2 and 1.0 alike


def delegated_callers(ctx: LedgerContext, *, admission: Admission | None = None) -> DelegatedCallers:
    """The ledger's 1.0 verifier: one per process, with the process's verified delegations.

    The :class:`DelegationCache` (ADR 0004 §3 step 4) lets an agent's delegation be parsed
    and verified once; only its kid, iss and times are checked again. ``admission`` is asked
    only when a request would start a Session never seen before (billing, docs/billing.md):
    a suspended tenant's new 1.0 Sessions are refused here as at the issuer.
    """
    return DelegatedCallers(pool=ctx.pool, issuer_keys=ctx.keys, agent_keys=ctx.agent_keys, replay=ctx.replay,
                            dpop_namespace=_DPOP_NAMESPACE, dev=ctx.settings.is_dev, delegations=DelegationCache(),
                            admission=admission)


class DelegatedCallerView(CallerView, frozen=True, kw_only=True):
    """A verified 1.0 caller: the Ops v1 view, and the scheme its access token came with.

    ``scheme`` is None when signed out (no access token): refusals then challenge ``Bearer``.
    """

    scheme: str | None = None


def _unavailable(retry_after: int = 5) -> Response[Any]:
    return Response({"error": "temporarily_unavailable", "error_description": "Temporarily unavailable; retry shortly."},
                    status_code=503, headers={**_NO_STORE, "Retry-After": str(retry_after)})


def delegated_refusal(error: ProtocolError, *, scheme: str | None = None, body_extra: dict[str, Any] | None = None,
                      headers: dict[str, str] | None = None) -> Response[Any]:
    """A 1.0 resource refusal (ADR 0004 §7).

    ``invalid_session`` and ``session_ended`` are 400 with no challenge; ``sign_in_required``
    is 401 with a ``Bearer`` challenge (naming the scope when there is one); other challenged codes carry the
    challenge of the scheme the token used (``Bearer`` when none was sent).
    """
    out = {"Content-Type": "application/json", **_NO_STORE, **(headers or {})}
    status: int | None = None
    if error.code in _SESSION_CODES:
        status = 400
    elif error.code == ErrorCode.SIGN_IN_REQUIRED:
        # ADR 0004 §7 [Q4]: sign in for an access token; the body names why.
        status = 401
        scope = error.to_body().get("scope")
        out["WWW-Authenticate"] = f'Bearer scope="{scope}"' if scope else "Bearer"
    elif error.entry.challenged:
        the_scheme = ChallengeScheme.DPOP if (scheme or "").lower() == "dpop" or \
            error.code == ErrorCode.INVALID_DPOP_PROOF else ChallengeScheme.BEARER
        value = error.challenge(the_scheme, algs=("ES256",) if the_scheme is ChallengeScheme.DPOP else ())
        if value:
            out["WWW-Authenticate"] = value
    return Response({**error.to_body(), **(body_extra or {})},
                    status_code=status or error.status_at(Surface.RESOURCE), headers=out)


async def authenticate_delegated(ctx: LedgerContext, tenant: LedgerTenant, request: Inbound, *,
                                 url: str) -> DelegatedCallerView | Response[Any]:
    """The verified 1.0 caller, or the response refusing the request."""
    callers: DelegatedCallers = ctx.delegated_callers
    try:
        verified = await callers.verify(tenant.tenant_id, tenant.issuer, method=request.method, url=url,
                                        headers=list(request.headers), now=ctx.now())
    except DelegatedRefusal as refused:
        return delegated_refusal(refused.error, scheme=refused.scheme)
    except Unavailable as exc:
        return _unavailable(exc.retry_after)
    except NewSessionRefused as exc:  # the tenant may not start new Sessions now; nothing was written
        return _unavailable(exc.retry_after)
    session, token = verified.session, verified.token
    return DelegatedCallerView(
        client_id=session.client_id, user_id=session.sub, session_id=verified.state.session_id,
        account=token.sub if token is not None else None,
        scopes=frozenset(parse_scope(token.scope or "")) if token is not None else frozenset(),
        scheme=verified.scheme)
