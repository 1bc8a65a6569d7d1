"""``POST {issuer}/browser/verify`` and ``POST {issuer}/browser/state``: the browser join (PAP §5).

The company's website, server to server with its resource-server credential (as for
introspection), hands Frontdoor the browser assertion an agent's browser posted to it, and
later asks the state of the Session that browser joined (``frontdoor_sessions.browser_join``):

- ``/browser/verify``, form ``assertion=<JWT>``: 200 ``{"browser_session", "return_to",
  "state"}`` when the browser may join, else 400 ``{"error": "invalid_assertion",
  "reason"}`` (the reason is for the company's logs; it never names a value).
- ``/browser/state``, form ``browser_session=<token>``: 200 with the Session's state
  ``{"active": true, "client_id", "sub", "sid", "signed_in", "account", "scope"}``, or
  ``{"active": false}`` once the Session has ended.
"""

from __future__ import annotations

import hashlib
from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import ReplayCache, authenticate_credential
from frontdoor_sessions.browser_join import BrowserJoinRefused, BrowserTokens, browser_state, join_browser
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import read_form
from .oauth_errors import NO_STORE, oauth_error, unavailable

__all__ = ["browser_state_endpoint", "browser_verify", "routes"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-browser"'}
_MAX_ASSERTION = 8192


def _tokens(state: State) -> BrowserTokens:
    tokens = getattr(state, "browser_tokens", None)
    if tokens is None:
        secret = hashlib.sha256(b"frontdoor/browser-session-secret\x00" + state.ctx.settings.kek.encode()).digest()
        tokens = state.browser_tokens = BrowserTokens(secret)
    return tokens


async def _authenticated_form(slug: str, request: Request[Any, Any, Any], state: State
                              ) -> tuple[Any, dict[str, str]] | Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    try:
        form = await read_form(request)
    except ProtocolError as exc:
        return oauth_error(exc)
    async with ctx.pool.acquire() as conn:
        if scheme.lower() != "bearer" or not await authenticate_credential(conn, tenant.tenant_id, credential.strip()):
            return Response({"error": "invalid_client", "error_description": "Authenticate with a resource-server credential."},
                            status_code=401, headers={**NO_STORE, **_CHALLENGE})
    return tenant, form


@post("/{slug:str}/browser/verify", status_code=200)
async def browser_verify(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    checked = await _authenticated_form(slug, request, state)
    if isinstance(checked, Response):
        return checked
    tenant, form = checked
    assertion = form.get("assertion")
    if not assertion or len(assertion) > _MAX_ASSERTION:
        return oauth_error(ProtocolError("invalid_request", "assertion is required."))
    ctx = state.ctx
    try:
        joined = await join_browser(ctx.pool, ReplayCache(ctx.redis), ctx.directory, _tokens(state), tenant,
                                    assertion=assertion, now=ctx.now())
    except BrowserJoinRefused as refused:
        return Response({"error": "invalid_assertion", "reason": str(refused.reason)}, status_code=400,
                        headers=NO_STORE)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    return Response({"browser_session": joined.browser_session, "return_to": joined.return_to,
                     "state": joined.state}, status_code=200, headers=NO_STORE)


@post("/{slug:str}/browser/state", status_code=200)
async def browser_state_endpoint(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    checked = await _authenticated_form(slug, request, state)
    if isinstance(checked, Response):
        return checked
    tenant, form = checked
    token = form.get("browser_session")
    if not token:
        return oauth_error(ProtocolError("invalid_request", "browser_session is required."))
    ctx = state.ctx
    async with ctx.pool.acquire() as conn:
        body = await browser_state(conn, _tokens(state), tenant_id=tenant.tenant_id, token=token, now=ctx.now())
    return Response(body, status_code=200, headers=NO_STORE)


routes = [browser_verify, browser_state_endpoint]
