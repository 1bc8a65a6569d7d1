"""``POST {issuer}/oauth/token``: the token endpoint, dispatching to one grant per type.

Grants (each its own module in ``frontdoor_sessions``): jwt-bearer (Sessions, PAP §4.2),
device_code (Device Sign-In, PAP §4.6), authorization_code (Direct Sign-In, PAP §4.5) and
refresh_token (Account Tokens, PAP §4.8).
Every answer, success or refusal, carries ``Cache-Control: no-store``.

:func:`answer` is the endpoint: the lean ASGI route (:mod:`.lean_routes`, mounted in front
of Litestar by ``asgi.py``) and the Litestar handler below both call it, so the wire format,
the client authentication and the errors are one code path.

Billing (docs/billing.md): once a tenant's grace period for an unpaid invoice has ended,
a *new* Session (jwt-bearer without ``session_id``) is refused with ``503
temporarily_unavailable`` and ``Retry-After`` (RFC 6749 §4.1.2.1's code, the catalogue's
503; an agent waits for Retry-After as PAP-4.3-18 asks), asked by the grant once the
client is authenticated (an unauthenticated caller gets ``invalid_client``). Renewing a Session, sign-in,
refresh and everything after are never refused for billing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from frontdoor_core.errors import Unavailable
from frontdoor_core.metrics import TOKEN_GRANTS, grant_type_label
from frontdoor_httpkit import client_address
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import Grant, GrantRefused, TokenRequest
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import NOT_FOUND_BODY
from .form import parse_form
from .introspect import Answer
from .oauth_errors import NO_STORE, UNAVAILABLE_BODY

__all__ = ["answer", "token"]

_encode = msgspec.json.Encoder().encode


def _refused(error: ProtocolError, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(error.status, _encode(error.to_body()), {**NO_STORE, **(headers or {})})


async def answer(ctx: Any, grants: Mapping[str, Grant], slug: str, content_type: str, raw: bytes, *,
                 dpop: Sequence[str], address: str) -> Answer:
    """The endpoint's answer for one request: its form body as sent, its ``DPoP`` fields and
    the client's network key (`frontdoor_httpkit.client_address`)."""
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return Answer(404, _encode(NOT_FOUND_BODY), {"Cache-Control": "no-store"})
    try:
        form = parse_form(content_type, raw)
    except ProtocolError as exc:
        return _refused(exc)
    grant_type = form.get("grant_type")
    if grant_type is None:
        TOKEN_GRANTS.labels("missing", "invalid_request").inc()
        return _refused(ProtocolError("invalid_request", "grant_type is required."))
    grant = grants.get(grant_type)
    if grant is None:
        TOKEN_GRANTS.labels(grant_type_label(grant_type), "unsupported_grant_type").inc()
        return _refused(ProtocolError("unsupported_grant_type", "This grant type is not supported here."))
    req = TokenRequest(
        grant_type=grant_type, client_id=form.get("client_id"),
        client_assertion_type=form.get("client_assertion_type"), client_assertion=form.get("client_assertion"),
        assertion=form.get("assertion"), session_id=form.get("session_id"), resource=form.get("resource"),
        scope=form.get("scope"), device_code=form.get("device_code"), refresh_token=form.get("refresh_token"),
        code=form.get("code"), code_verifier=form.get("code_verifier"), redirect_uri=form.get("redirect_uri"),
        dpop=tuple(dpop), client_address=address,
    )
    kind = grant_type_label(grant_type)
    try:
        outcome = await grant.issue(tenant, req)
    except GrantRefused as exc:
        TOKEN_GRANTS.labels(kind, exc.error.code.value).inc()
        return _refused(exc.error, exc.headers)
    except Unavailable as exc:
        TOKEN_GRANTS.labels(kind, "unavailable").inc()
        return Answer(503, _encode(UNAVAILABLE_BODY), {**NO_STORE, "Retry-After": str(exc.retry_after)})
    TOKEN_GRANTS.labels(kind, "issued").inc()
    return Answer(200, _encode(outcome.body), {**NO_STORE, **outcome.headers})


@post("/{slug:str}/oauth/token", status_code=200)
async def token(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """The same endpoint through Litestar (an app built with ``create_app`` alone)."""
    a = await answer(state.ctx, state.grants, slug, request.headers.get("content-type", ""), await request.body(),
                     dpop=request.headers.getall("dpop", []),
                     address=client_address(request, state.ctx.settings.trusted_proxies))
    return Response(a.body, status_code=a.status, headers=a.headers, media_type="application/json")
