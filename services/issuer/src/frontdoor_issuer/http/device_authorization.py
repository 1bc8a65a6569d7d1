"""``POST {issuer}/oauth/device``: the device authorization endpoint (PAP §4.6, RFC 8628 §3.1).

Client-authenticated (``private_key_jwt``) with ``scope``; answers the device code, the
user code and the verification links on the issuer's host. No DPoP here: nothing is
issued until the token endpoint's device_code grant.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_httpkit import client_address
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import DeviceAuthorization, GrantRefused, TokenRequest
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import read_form
from .oauth_errors import NO_STORE, oauth_error, unavailable

__all__ = ["device_authorization"]


@post("/{slug:str}/oauth/device", status_code=200)
async def device_authorization(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    try:
        form = await read_form(request)
    except ProtocolError as exc:
        return oauth_error(exc)
    req = TokenRequest(
        client_id=form.get("client_id"), client_assertion_type=form.get("client_assertion_type"),
        client_assertion=form.get("client_assertion"), scope=form.get("scope"),
        client_address=client_address(request, state.ctx.settings.trusted_proxies),
    )
    starter: DeviceAuthorization = state.device_authorization
    try:
        outcome = await starter.start(tenant, req)
    except GrantRefused as exc:
        return oauth_error(exc.error, exc.headers)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    return Response(outcome.body, status_code=200, headers={**NO_STORE, **outcome.headers})
