"""The PAP 1.0 browser join, hosted by the issuer (ADR 0004 §8, [S §6]).

The tenant's 1.0 ``web.browser_session_endpoint`` is ``{issuer}/join``; the three steps:

1. ``GET {issuer}/join`` — the agent's own browser gets a page holding a fresh one-use
   code (256 bits, stored hashed, :data:`~frontdoor_sessions.join_codes.JOIN_CODE_LIFETIME_S`)
   in ``#poppy-join-code``, and, in the same response, the join cookie the code is bound
   to (``__Host-fd_join``: ``Secure; HttpOnly; SameSite=Lax; Path=/``, named ``fd_join``
   and not ``Secure`` over development ``http://``). ``no-store``, framing denied
   (``frame-ancestors 'none'``, ``X-Frame-Options: DENY``), ``Cross-Origin-Opener-Policy:
   same-origin``, no referrer.
2. ``POST {issuer}/join/authorize`` — the agent's trusted code sends ``{"code"}`` with its
   ``Poppy-Session`` header (``htu`` this URL, ``aud`` the issuer) and, signed in, its
   access token. Verified like every 1.0 request (`frontdoor_sessions.DelegatedCallers`);
   ``204`` attaches the Session (and the live sign-in) to the code, once. Session failures
   are ``400 invalid_session`` / ``400 session_ended``, token failures the ``401``
   challenge of the scheme used (ADR 0004 §7); a code that is unknown, expired, already
   authorized or already submitted is ``400 {"error": "invalid_grant"}`` (RFC 6749 §5.2:
   the grant is "invalid, expired, revoked" or used).
3. ``POST {issuer}/join/redeem`` — the browser submits the page's form. The code is
   consumed first, whatever follows; then the cookie must be the one it was issued with
   (never a code from a message or another browser) and step 2 done. The answer is a page
   whose form posts a join assertion (`frontdoor_protocol.join_assertion`, 60 s, one use,
   signed with the tenant's issuer key, ``aud`` the callback) to the company's
   ``protocol.join_callback_url`` — a form POST, so the assertion never lands in a URL. A
   static script submits it; the button does without script.

Neither POST carries the CSRF token of the issuer's other forms: ``authorize`` is called
by the agent's code and authenticated by the Session header, and ``redeem`` is bound to
the join cookie set with the code (``SameSite=Lax``: a cross-site POST does not carry it),
and must consume the code even when the submission is refused.
"""

from __future__ import annotations

import secrets
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec
from frontdoor_core.errors import Unavailable
from frontdoor_httpkit import BadBody, content_security_policy, origin_source, read_json
from frontdoor_protocol import ChallengeScheme, ErrorCode, Surface
from frontdoor_protocol.join_assertion import JOIN_ASSERTION_LIFETIME, JoinClaims, mint_join_assertion
from frontdoor_sessions import DelegatedCallers, DelegatedRefusal, JoinGrant, NewSessionRefused, TenantIssuer
from frontdoor_tenancy.domain_claims import listed_domains
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.params import FromPath
from litestar.response import Template

from .discovery import not_found
from .oauth_errors import NO_STORE, unavailable
from .sign_in_pages import PAGE_HEADERS

__all__ = ["JOIN_CODE_ELEMENT_ID", "join_cookie_name", "routes"]

JOIN_CODE_ELEMENT_ID: Final = "poppy-join-code"
"""The ``id`` of the element holding the code on the join page, for the agent's code to read."""
_ISOLATION: Final = {"X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"}
_MAX_CODE: Final = 128
_MAX_BODY: Final = 4096


class _AuthorizeBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    code: str


def join_cookie_name(dev: bool) -> str:
    """``__Host-fd_join`` over HTTPS; browsers refuse the prefix without ``Secure``, so dev uses ``fd_join``."""
    return "fd_join" if dev else "__Host-fd_join"


def _error(code: str, status: int, description: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response({"error": code, "error_description": description}, status_code=status,
                    headers={**NO_STORE, **(headers or {})})


def _refusal(refused: DelegatedRefusal) -> Response[Any]:
    """ADR 0004 §7: Session failures 400 without a challenge, token failures the scheme's challenge."""
    error = refused.error
    if error.code in (ErrorCode.INVALID_SESSION, ErrorCode.SESSION_ENDED):
        return Response(error.to_body(), status_code=400, headers=NO_STORE)
    scheme = ChallengeScheme.DPOP if (refused.scheme or "").lower() == "dpop" \
        or error.code == ErrorCode.INVALID_DPOP_PROOF else ChallengeScheme.BEARER
    headers = dict(NO_STORE)
    value = error.challenge(scheme, algs=("ES256",) if scheme is ChallengeScheme.DPOP else ())
    if value:
        headers["WWW-Authenticate"] = value
    return Response(error.to_body(), status_code=error.status_at(Surface.RESOURCE), headers=headers)


async def _offering(state: State, slug: str) -> TenantIssuer | None:
    """The tenant, when it serves 1.0 and has a join callback (else the join does not exist)."""
    tenant: TenantIssuer | None = await state.ctx.tenant(slug)
    if tenant is None or not tenant.settings.protocol.serves("1.0") or tenant.settings.protocol.join_callback_url is None:
        return None
    return tenant


async def _callback_allowed(state: State, tenant: TenantIssuer, url: str) -> bool:
    """The callback is on one of the tenant's verified domains (loopback ``http://`` in dev)."""
    parts = urlsplit(url)
    if state.ctx.settings.is_dev and parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost", "::1"}:
        return True
    if parts.scheme != "https" or not parts.hostname:
        return False
    async with state.ctx.pool.acquire() as conn:
        domains = await listed_domains(conn, tenant.tenant_id)
    return parts.hostname.lower().rstrip(".") in domains


def _page(template: str, tenant: TenantIssuer, state: State, status: int = 200, *, form_targets: tuple[str, ...] = (),
          cookies: list[Cookie] | None = None, **context: Any) -> Template:
    context.setdefault("company", tenant.settings.organization_name or "the company")
    context["static_base"] = f"{state.ctx.settings.issuer_base_url}/_static"
    sources = [s for s in map(origin_source, form_targets) if s is not None]
    headers = {**PAGE_HEADERS, **_ISOLATION, "Content-Security-Policy": content_security_policy(form_action=sources)}
    return Template(template, context=context, status_code=status, headers=headers, cookies=cookies or [])


def _refused_page(tenant: TenantIssuer, state: State, *, cookies: list[Cookie] | None = None) -> Response[Any]:
    return _page("message.html", tenant, state, 400, cookies=cookies, heading="This browser could not join",
                 message="The code is not valid, has expired or was already used. Ask your assistant to start again.")


@get("/{slug:str}/join", include_in_schema=False)
async def join_page(slug: FromPath[str], state: State) -> Response[Any]:
    """Step 1: a fresh code for this browser and the cookie it is bound to."""
    tenant = await _offering(state, slug)
    if tenant is None:
        return not_found()
    ctx = state.ctx
    secret = secrets.token_urlsafe(32)
    try:
        code = await state.join_codes.issue(tenant.tenant_id, cookie_secret=secret, now=ctx.now())
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    dev = ctx.settings.is_dev
    cookie = Cookie(key=join_cookie_name(dev), value=secret, path="/", httponly=True, samesite="lax", secure=not dev,
                    max_age=state.join_codes.lifetime_s)
    return _page("join.html", tenant, state, cookies=[cookie], code=code, code_id=JOIN_CODE_ELEMENT_ID,
                 action=f"{tenant.issuer}/join/redeem")


@post("/{slug:str}/join/authorize", status_code=200, include_in_schema=False)
async def join_authorize(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """Step 2: the agent vouches for the code with its Session (and sign-in)."""
    tenant = await _offering(state, slug)
    if tenant is None:
        return not_found()
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > _MAX_BODY):
        return _error("invalid_request", 400, "The body is too large.")
    try:
        body = await read_json(request, _AuthorizeBody)
    except BadBody:
        return _error("invalid_request", 400, 'The body must be the JSON object {"code": "..."}.')
    ctx = state.ctx
    now = ctx.now()
    callers: DelegatedCallers = state.delegated_callers
    try:
        caller = await callers.verify(tenant.tenant_id, tenant.issuer, method="POST",
                                      url=f"{tenant.issuer}/join/authorize",
                                      headers=list(request.headers.multi_items()), now=now)
    except DelegatedRefusal as refused:
        return _refusal(refused)
    except (Unavailable, NewSessionRefused) as exc:  # NewSessionRefused: billing, a new Session (docs/billing.md)
        return unavailable(exc.retry_after)
    session, seen = caller.session, caller.state
    signed_in = caller.token is not None and seen.signed_in
    grant = JoinGrant(client_id=session.client_id, sid=session.sid, sub=session.sub, session=seen.session_id,
                      agent_id=session.agent_id,
                      account=caller.token.sub if signed_in and caller.token else None,
                      scope=(caller.token.scope or "") if signed_in and caller.token else None,
                      sgn=caller.token.sgn if signed_in and caller.token else None)
    if len(body.code) > _MAX_CODE:
        return _error("invalid_grant", 400, "The join code is unknown, expired or already used.")
    try:
        status = await state.join_codes.authorize(tenant.tenant_id, body.code, grant, now=now)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    if status != "authorized":
        return _error("invalid_grant", 400, "The join code is unknown, expired or already used.")
    return Response(None, status_code=204, headers=NO_STORE)


@post("/{slug:str}/join/redeem", include_in_schema=False, request_max_body_size=_MAX_BODY)
async def join_redeem(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """Step 3: the browser submits the code with its cookie; the code is gone after this."""
    tenant = await _offering(state, slug)
    if tenant is None:
        return not_found()
    ctx = state.ctx
    form = await request.form()
    code = str(form.get("code", ""))
    if not code or len(code) > _MAX_CODE:
        return _refused_page(tenant, state)
    now = ctx.now()
    dev = ctx.settings.is_dev
    try:
        redeemed = await state.join_codes.redeem(tenant.tenant_id, code,
                                                 cookie_secret=request.cookies.get(join_cookie_name(dev)), now=now)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    expired_cookie = Cookie(key=join_cookie_name(dev), value="", path="/", httponly=True, samesite="lax",
                            secure=not dev, max_age=0)
    grant = redeemed.grant
    callback = tenant.settings.protocol.join_callback_url
    if grant is None or callback is None:
        return _refused_page(tenant, state, cookies=[expired_cookie])
    if not await _callback_allowed(state, tenant, callback):
        return _page("message.html", tenant, state, 409, cookies=[expired_cookie],
                     heading="This company's join page is not set up",
                     message="Its join callback is not on one of its verified domains.")
    epoch = int(now.timestamp())
    async with ctx.pool.acquire() as conn:
        signer = await ctx.keys.signer(conn, tenant.tenant_id, now)
    assertion = mint_join_assertion(JoinClaims(
        iss=tenant.issuer, aud=callback, client_id=grant.client_id, sid=grant.sid, sub=grant.sub,
        session=grant.session, agent_id=grant.agent_id, account=grant.account, scope=grant.scope, sgn=grant.sgn,
        jti=secrets.token_urlsafe(24), iat=epoch, exp=epoch + JOIN_ASSERTION_LIFETIME), signer.key, signer.kid)
    return _page("join_continue.html", tenant, state, form_targets=(callback,), cookies=[expired_cookie],
                 action=callback, assertion=assertion)


routes: list[Any] = [join_page, join_authorize, join_redeem]
