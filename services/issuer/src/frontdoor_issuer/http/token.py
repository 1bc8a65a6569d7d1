"""``POST {issuer}/oauth/token``: the token endpoint, dispatching to one grant per type.

Grants (each its own module in ``frontdoor_sessions``): jwt-bearer (Sessions, PAP §4.2),
device_code (Device Sign-In, PAP §4.6), authorization_code (Direct Sign-In, PAP §4.5) and
refresh_token (Account Tokens, PAP §4.8).
Every answer, success or refusal, carries ``Cache-Control: no-store``.

Billing (docs/billing.md): once a tenant's grace period for an unpaid invoice has ended,
a *new* Session (jwt-bearer without ``session_id``) is refused with ``503
temporarily_unavailable`` and ``Retry-After`` (RFC 6749 §4.1.2.1's code, the catalogue's
503; an agent waits for Retry-After as PAP-4.3-18 asks), asked by the grant once the
client is authenticated (an unauthenticated caller gets ``invalid_client``). Renewing a Session, sign-in,
refresh and everything after are never refused for billing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_core.metrics import TOKEN_GRANTS, grant_type_label
from frontdoor_httpkit import client_address
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import Grant, GrantRefused, TokenRequest
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import read_form
from .oauth_errors import NO_STORE, oauth_error, unavailable

__all__ = ["token"]


@post("/{slug:str}/oauth/token", status_code=200)
async def token(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    try:
        form = await read_form(request)
    except ProtocolError as exc:
        return oauth_error(exc)
    grants: Mapping[str, Grant] = state.grants
    grant_type = form.get("grant_type")
    if grant_type is None:
        TOKEN_GRANTS.labels("missing", "invalid_request").inc()
        return oauth_error(ProtocolError("invalid_request", "grant_type is required."))
    grant = grants.get(grant_type)
    if grant is None:
        TOKEN_GRANTS.labels(grant_type_label(grant_type), "unsupported_grant_type").inc()
        return oauth_error(ProtocolError("unsupported_grant_type", "This grant type is not supported here."))
    req = TokenRequest(
        grant_type=grant_type, client_id=form.get("client_id"),
        client_assertion_type=form.get("client_assertion_type"), client_assertion=form.get("client_assertion"),
        assertion=form.get("assertion"), session_id=form.get("session_id"), resource=form.get("resource"),
        scope=form.get("scope"), device_code=form.get("device_code"), refresh_token=form.get("refresh_token"),
        code=form.get("code"), code_verifier=form.get("code_verifier"), redirect_uri=form.get("redirect_uri"),
        dpop=tuple(request.headers.getall("dpop", [])),
        client_address=client_address(request, state.ctx.settings.trusted_proxies),
    )
    kind = grant_type_label(grant_type)
    try:
        outcome = await grant.issue(tenant, req)
    except GrantRefused as exc:
        TOKEN_GRANTS.labels(kind, exc.error.code.value).inc()
        return oauth_error(exc.error, exc.headers)
    except Unavailable as exc:
        TOKEN_GRANTS.labels(kind, "unavailable").inc()
        return unavailable(exc.retry_after)
    TOKEN_GRANTS.labels(kind, "issued").inc()
    return Response(outcome.body, status_code=200, headers={**NO_STORE, **outcome.headers})
