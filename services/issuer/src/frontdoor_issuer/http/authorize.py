"""``GET {issuer}/oauth/authorize``: Direct Sign-In starts in the user's browser (PAP §4.5).

RFC 6749 §4.1.1 with PKCE (RFC 7636, ``S256`` only) and RFC 9207 ``iss``:

- ``client_id`` names the agent; its Client ID Metadata Document is fetched and checked
  (`AgentDirectory`). ``redirect_uri`` must be exactly one of its ``redirect_uris``
  (PAP-4.5-01). A problem with either is *shown* on a page and never redirected: the
  browser must not be sent to an address nobody vouched for (RFC 6749 §4.1.2.1);
- every other problem redirects to the ``redirect_uri`` with ``error``,
  ``error_description``, ``state`` and ``iss``: ``response_type`` other than ``code``
  (``unsupported_response_type``), a missing or repeated parameter, no ``state``, PKCE
  missing or not ``S256`` (``invalid_request``), ``scope`` missing (``invalid_request``)
  or beyond what the tenant offers for Direct Sign-In (``invalid_scope``, PAP-4.4-02), Direct
  Sign-In off or the agent not allowed (``unauthorized_client``), the company's login not
  connected (``temporarily_unavailable``);
- PAP 1.0 ([S §3], RFC 8252 §7.3): while the tenant serves 1.0, ``redirect_uri`` may
  also be a loopback IP literal (``http://127.0.0.1:{port}/…``, ``http://[::1]:{port}/…``)
  matching one the document registers, on any port. Such a code is redeemable only by a
  1.0 redemption (no ``session_id``); a tenant serving only 1.0 also needs the document to
  declare ``private_key_jwt`` [S §3], shown like a bad ``redirect_uri``;
- a valid request creates a *direct* flow holding the request and sends the browser
  through the company's login (the handoff shared with Device Sign-In, `sign_in_pages`),
  then the consent page, whose decision redirects with a one-use ``code`` or
  ``error=access_denied``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl

from frontdoor_core.errors import Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_keys import shard
from frontdoor_httpkit import client_address
from frontdoor_identity import ClientResolutionError, get_agent_policy, is_allowed, loopback_redirect_matches
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.scopes import format_scope
from frontdoor_sessions import allowed_scopes, new_attempt_id, record_prompt, requested_scopes
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath

from ..flows import FLOW_TTL_S, FlowState
from .discovery import not_found
from .sign_in_pages import authorization_redirect, message, start_handoff

__all__ = ["authorize"]

_PARAMETERS = ("response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge",
               "code_challenge_method")
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # BASE64URL(SHA-256), unpadded
_MAX_STATE = 1024
_REQUESTS_PER_NETWORK_PER_MINUTE = 60


class _Shown(Exception):
    """A problem with client_id or redirect_uri: shown to the user, never redirected."""


def _parameters(request: Request[Any, Any, Any]) -> dict[str, list[str]]:
    """The query's parameters; a parameter without a value counts as omitted (RFC 6749 §3.1)."""
    raw = request.scope.get("query_string", b"")
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        return {}
    out: dict[str, list[str]] = {}
    for key, value in pairs:
        if value != "" and "\x00" not in value:
            out.setdefault(key, []).append(value)
    return out


def _single(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name, [])
    return values[0] if len(values) == 1 else None


@get("/{slug:str}/oauth/authorize", include_in_schema=False)
async def authorize(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    network = client_address(request, state.ctx.settings.trusted_proxies)
    try:
        allowed, retry = await hit(ctx.redis, f"authorize:{shard(tenant.tenant_id)}:{network}",
                                   limit=_REQUESTS_PER_NETWORK_PER_MINUTE, window_s=60)
    except Exception:
        raise Unavailable("rate_limiter_unavailable", "Temporarily unavailable.") from None
    if not allowed:
        page = message(tenant, state, "Too many sign-ins", "Wait a minute, then start again from your assistant.", 429)
        page.headers["Retry-After"] = str(retry)
        return page

    params = _parameters(request)
    # 1. Who is asking and where the answer goes: checked before anything is redirected.
    client_id, redirect_uri = _single(params, "client_id"), _single(params, "redirect_uri")
    if client_id is None:
        return message(tenant, state, "This sign-in link is not valid",
                       "It does not name the assistant that sent you here. Start again from your assistant.", 400)
    try:
        client = await ctx.directory.get_client(client_id)
    except (ClientResolutionError, ValueError):
        return message(tenant, state, "This sign-in link is not valid",
                       "We could not identify the assistant that sent you here. Start again from your assistant.",
                       400)
    serves_1_0 = tenant.settings.protocol.serves("1.0")
    loopback = (redirect_uri is not None and serves_1_0 and redirect_uri not in client.metadata.redirect_uris
                and loopback_redirect_matches(redirect_uri, client.metadata.loopback_redirect_uris))
    only_1_0 = loopback or not tenant.settings.protocol.serves("0.2")
    if redirect_uri is None or (redirect_uri not in client.metadata.redirect_uris and not loopback):
        return message(tenant, state, "This sign-in link is not valid",
                       "It would send you back to an address the assistant has not registered. "
                       "Nothing was shared; start again from your assistant.", 400)
    if only_1_0 and not client.metadata.auth_method_declared:
        return message(tenant, state, "This sign-in link is not valid",
                       "The assistant's registration does not allow signing in here. Start again from your assistant.",
                       400)

    # 2. From here every problem goes back to the agent, with state and iss.
    states = params.get("state", [])
    agent_state = states[0] if len(states) == 1 and len(states[0]) <= _MAX_STATE else None

    def refuse(error: str, description: str) -> Response[Any]:
        return authorization_redirect(redirect_uri, tenant.issuer, error=error, error_description=description,
                                      state=agent_state)

    if any(len(params.get(name, [])) > 1 for name in _PARAMETERS):
        return refuse("invalid_request", "A parameter is repeated.")
    response_type = _single(params, "response_type")
    if response_type is None:
        return refuse("invalid_request", "response_type is required.")
    if response_type != "code":
        return refuse("unsupported_response_type", "Only response_type=code is supported.")
    if agent_state is None:
        return refuse("invalid_request", f"state is required (at most {_MAX_STATE} characters).")
    offered = allowed_scopes(tenant.settings, "direct")
    if not offered:
        return refuse("unauthorized_client", "Direct Sign-In is not offered here.")
    try:
        scopes = requested_scopes(_single(params, "scope"), offered)
    except ProtocolError as exc:
        return refuse(str(exc.code), exc.description or "The scope is not valid.")
    method, challenge = _single(params, "code_challenge_method"), _single(params, "code_challenge")
    if method != "S256" or challenge is None or not _CHALLENGE.fullmatch(challenge):
        return refuse("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256.")
    async with ctx.pool.acquire() as conn:
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
    if not is_allowed(policy, client_id):
        return refuse("unauthorized_client", "This agent may not sign in here.")

    attempt_id, now = new_attempt_id(), ctx.now()
    async with ctx.pool.acquire() as conn:  # the funnel's sign-in attempt: prompted now
        await record_prompt(conn, tenant.tenant_id, attempt_id, client_id=client_id, sign_in_type="direct", now=now,
                            expires_at=now + timedelta(seconds=FLOW_TTL_S))
    flow = FlowState(tenant_id=tenant.tenant_id, kind="direct", client_id=client_id, attempt_id=attempt_id,
                     agent_name=client.metadata.client_name, requested_scope=list(scopes),
                     authorize_request={"redirect_uri": redirect_uri, "state": agent_state,
                                        "code_challenge": challenge, "scope": format_scope(scopes),
                                        **({"profile": "1.0"} if loopback else {})})
    handoff = await start_handoff(state, tenant, slug, flow)
    if handoff is None:
        return refuse("temporarily_unavailable", "Signing in at the company is not available right now.")
    return handoff
