"""A PAP 1.0 caller at the operations endpoint: a ``Poppy-Session`` JWT, and an access token when signed in.

ADR 0004 §3, §6, §7, §9. The order of [S §3]: the agent's identity keys (its CIMD and
JWKS, the tenant's agent policy), the pure checks of
:func:`frontdoor_protocol.verify_delegated_request` (delegation, Session JWT, the access
token of the same client bound by ``ath``, a DPoP proof when the token is bound), and only
then the Session's state at (tenant, ``client_id``, ``sid``): the ``jti`` claimed once, the
Session created signed out at first sight or checked for the same ``sub`` and
``agent_id``, the access token's sign-in (``sgn``) still live.

Answers: Session failures ``400 invalid_session`` / ``400 session_ended`` with no challenge;
token failures the OAuth challenge of the scheme used (``401 invalid_token``); keys or
state that cannot be read, ``503`` with ``Retry-After``. The Ops v1 rules are applied to the
returned :class:`DelegatedCallerView` unchanged: the operation's owner is (``client_id``,
``sub``), its account the access token's.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_identity import ClientResolutionError, InvalidClientMetadata, get_agent_policy, is_allowed
from frontdoor_operations.rules import CallerView
from frontdoor_protocol import (
    ChallengeScheme,
    DelegationCache,
    ErrorCode,
    ProtocolError,
    Surface,
    UnknownAgentKeyId,
    UnknownKeyId,
    parse_delegated_request,
    parse_scope,
    verify_delegated_request,
)
from frontdoor_sessions.delegated_sessions import claim_session_jti, observe_delegated_session
from joserfc.jwk import KeySet
from litestar import Request, Response

from .context import LedgerContext, LedgerTenant

__all__ = ["DelegatedCallerView", "authenticate_delegated", "delegated_refusal"]

_NO_STORE = {"Cache-Control": "no-store"}
_KEYS_RETRY_AFTER = 30
_SESSION_CODES = frozenset({ErrorCode.INVALID_SESSION, ErrorCode.SESSION_ENDED})
_DELEGATIONS = DelegationCache()
"""The process's verified delegations (ADR 0004 §3 step 4): an agent's delegation is parsed and
verified once, then only its kid, iss and times are checked again (keyed by the exact string
and the identity key that verified it, so a rotated agent key misses)."""


class DelegatedCallerView(CallerView, frozen=True, kw_only=True):
    """A verified 1.0 caller: the Ops v1 view, and the scheme its access token came with.

    ``scheme`` is None when signed out (no access token): refusals then challenge ``Bearer``.
    """

    scheme: str | None = None


class _Refusal(Exception):
    def __init__(self, response: Response[Any]) -> None:
        super().__init__("refused")
        self.response = response


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


def _session_error(code: ErrorCode = ErrorCode.INVALID_SESSION) -> _Refusal:
    text = "The Session has ended: start a new one." if code == ErrorCode.SESSION_ENDED \
        else "The Poppy-Session header is not valid."
    return _Refusal(delegated_refusal(ProtocolError(code, text)))


async def authenticate_delegated(ctx: LedgerContext, tenant: LedgerTenant, request: Request[Any, Any, Any], *,
                                 url: str) -> DelegatedCallerView | Response[Any]:
    """The verified 1.0 caller, or the response refusing the request."""
    try:
        return await _authenticate(ctx, tenant, request, url=url)
    except _Refusal as refused:
        return refused.response


async def _agent_keys(ctx: LedgerContext, tenant: LedgerTenant, client_id: str, *, refresh: bool = False) -> KeySet:
    """The agent's identity keys under the 1.0 rules (ADR 0004 §6), if the tenant accepts the agent.

    A refused agent or a document breaking the rules (a redirect, another ``client_id``, a
    ``jwks_uri`` elsewhere) is ``invalid_session``; keys that cannot be loaded now, ``503``.
    """
    async with ctx.pool.acquire() as conn:  # released before the agent's documents are fetched
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
    if not is_allowed(policy, client_id):
        raise _session_error()
    try:
        loaded = await ctx.agent_keys.get_keys(client_id, refresh=refresh)
    except InvalidClientMetadata:
        raise _session_error() from None
    except ClientResolutionError:
        raise _Refusal(_unavailable(_KEYS_RETRY_AFTER)) from None
    keys: KeySet = loaded.keys
    return keys


async def _authenticate(ctx: LedgerContext, tenant: LedgerTenant, request: Request[Any, Any, Any], *,
                        url: str) -> DelegatedCallerView:
    now = ctx.now()
    epoch = int(now.timestamp())
    headers = list(request.headers.multi_items())
    dev = ctx.settings.is_dev
    try:
        delegated = parse_delegated_request(headers=headers, url=url, allow_http_loopback=dev, delegations=_DELEGATIONS)
    except ProtocolError as error:
        raise _Refusal(delegated_refusal(error)) from None
    scheme_name = delegated.scheme.value if delegated.scheme is not None else None
    client_id = delegated.session.client_id
    agent_keys = await _agent_keys(ctx, tenant, client_id)
    async with ctx.pool.acquire() as conn:
        issuer_keys = await ctx.keys.keyset(conn, tenant.tenant_id, now)
        reloaded_agent = reloaded_issuer = False
        while True:
            try:
                verified = verify_delegated_request(
                    delegated, method=request.method, url=url, identity_keys=agent_keys, issuer_keys=issuer_keys,
                    issuer=tenant.issuer, now=epoch, allow_http_loopback=dev, delegations=_DELEGATIONS)
                break
            except UnknownAgentKeyId:
                # An unknown delegation kid: reload the agent's keys once (the directory limits reloads).
                if reloaded_agent:
                    raise _session_error() from None
                reloaded_agent = True
                agent_keys = await _agent_keys(ctx, tenant, client_id, refresh=True)
            except UnknownKeyId:
                if reloaded_issuer:
                    raise _Refusal(delegated_refusal(
                        ProtocolError(ErrorCode.INVALID_TOKEN, "The access token is not valid."),
                        scheme=scheme_name)) from None
                reloaded_issuer = True
                issuer_keys = await ctx.keys.keyset(conn, tenant.tenant_id, now, refresh=True)
            except ProtocolError as error:
                raise _Refusal(delegated_refusal(error, scheme=scheme_name)) from None
            except ValueError:  # a request URL no htu can match (control characters)
                raise _session_error() from None
        session, token = verified.session, verified.token
        try:
            # ADR 0004 §3 [Q12]: a Session JWT is used once; a bound token's proof too (RFC 9449 §11.1).
            fresh = await claim_session_jti(ctx.replay, tenant_id=tenant.tenant_id, client_id=session.client_id,
                                            jti=session.jti, iat=session.iat, now=epoch)
            if fresh and verified.proof is not None:
                proof = verified.proof
                fresh = await ctx.replay.claim("dpop-ledger", f"{tenant.tenant_id}:{proof.jkt}", proof.jti,
                                               ttl_s=max(int(proof.accept_until - epoch), 1))
        except Unavailable as exc:
            raise _Refusal(_unavailable(exc.retry_after)) from None
        if not fresh:
            raise _session_error()
        state = await observe_delegated_session(conn, tenant.tenant_id, client_id=session.client_id,
                                                sid=session.sid, sub=session.sub, agent_id=session.agent_id,
                                                now=now, sgn=token.sgn if token is not None else None)
    if state.state == "ended":
        raise _session_error(ErrorCode.SESSION_ENDED)
    if state.state != "active":
        raise _session_error()
    if token is not None and not state.signed_in:
        # The sign-in was revoked or disconnected: its tokens are dead, the Session lives on (ADR 0004 §5).
        raise _Refusal(delegated_refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The access token is not valid."),
                                         scheme=scheme_name))
    return DelegatedCallerView(
        client_id=session.client_id, user_id=session.sub, session_id=state.session_id,
        account=token.sub if token is not None else None,
        scopes=frozenset(parse_scope(token.scope or "")) if token is not None else frozenset(),
        scheme=scheme_name)
