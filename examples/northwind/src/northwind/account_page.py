"""Northwind's "connected agents" page: a signed-in customer sees the agents connected to
their account and disconnects one (PAP §4.9, from the company's side).

Northwind knows its customer from its own sign-in, not from Frontdoor: ``/account/login``
checks the demo credentials and sets a small signed cookie (the account ID and an expiry,
HMAC-SHA256). ``/account/agents`` then asks Frontdoor through the sdk's
:class:`frontdoor_sdk.FrontdoorAccounts`, server to server with Northwind's resource-server
credential:

- ``connected_agents(account)`` (``GET {issuer}/accounts/{account}/agents``): the agents
  with a live sign-in to the account;
- ``disconnect(account, client_id)`` (``POST {issuer}/accounts/disconnect``): revokes that
  agent's Account Tokens for the account and signs its Sessions out at once; its next API
  call here answers ``403 sign_in_required``.

Any :class:`frontdoor_sdk.FrontdoorAccountsError` is a "please try again" page that changes
nothing.

Forms carry CSRF tokens (a double-submit cookie on the sign-in form, a token bound to the
account cookie on the disconnect forms); every page sends ``frame-ancestors 'none'`` and
loads nothing from anywhere. Agent names are the agents' own words and are escaped.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from html import escape
from typing import Any, Final
from urllib.parse import urlsplit

from frontdoor_sdk import ConnectedAgent, FrontdoorAccounts, FrontdoorAccountsError
from litestar import MediaType, Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.response import Redirect

from northwind import catalog
from northwind.config import NorthwindConfig

__all__ = ["ACCOUNT_COOKIE", "account_router"]

ACCOUNT_PATH: Final = "/account"
ACCOUNT_COOKIE: Final = "northwind_account"
LOGIN_CSRF_COOKIE: Final = "northwind_account_csrf"
_LIFETIME_S: Final = 8 * 3600
_MAX_FIELD: Final = 2048
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class _Signer:
    """Signs the account cookie and derives CSRF tokens from it (one secret, two purposes)."""

    def __init__(self, config: NorthwindConfig) -> None:
        # Derived from Northwind's private login key, so cookies survive a restart with the same key.
        private = str(config.signing_key.as_dict(private=True)["d"]).encode()
        self._key = hashlib.sha256(b"northwind/account-cookie/v1\x00" + private).digest()

    def _mac(self, purpose: str, value: str) -> str:
        return _b64(hmac.new(self._key, f"{purpose}\x00{value}".encode(), hashlib.sha256).digest())

    def cookie(self, account_id: str, now: float) -> str:
        body = f"{_b64(account_id.encode())}.{int(now) + _LIFETIME_S}"
        return f"{body}.{self._mac('cookie', body)}"

    def account(self, cookie: str | None, now: float) -> str | None:
        """The account a cookie names, if Northwind signed it and it has not expired."""
        if not cookie or len(cookie) > _MAX_FIELD or cookie.count(".") != 2:
            return None
        body, _, mac = cookie.rpartition(".")
        encoded, _, expires = body.partition(".")
        if not hmac.compare_digest(mac.encode(), self._mac("cookie", body).encode()):
            return None
        if not expires.isdigit() or int(expires) <= now:
            return None
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode() or None

    def csrf(self, cookie: str) -> str:
        return self._mac("csrf", cookie)


def _page(title: str, body: str, *, status: int = 200, cookies: list[Cookie] | None = None) -> Response[str]:
    html = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} - Northwind</title></head>\n<body><main>\n<h1>{escape(title)}</h1>\n{body}\n"
        "</main></body></html>\n"
    )
    return Response(html, status_code=status, media_type=MediaType.HTML, headers=_HEADERS, cookies=cookies or [])


def _text(value: object) -> str:
    return value if isinstance(value, str) and len(value) <= _MAX_FIELD else ""


def _login_form(csrf: str, *, error: str | None = None) -> str:
    alert = f'<p role="alert">{escape(error)}</p>\n' if error else ""
    return (
        f"<p>Sign in to see the agents connected to your Northwind account.</p>\n{alert}"
        f'<form method="post" action="{ACCOUNT_PATH}/login">\n'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}">\n'
        '<p><label>Email <input type="email" name="email" autocomplete="username" required></label></p>\n'
        '<p><label>Password <input type="password" name="password" autocomplete="current-password" required>'
        "</label></p>\n"
        '<p><button type="submit">Sign in</button></p>\n</form>'
    )


def _agents_list(account: catalog.DemoAccount | None, account_id: str, agents: list[ConnectedAgent],
                 csrf: str) -> str:
    who = escape(account.name if account else account_id)
    if not agents:
        listing = "<p>No agent is connected to your account.</p>"
    else:
        items = []
        for agent in agents:
            client_id = agent.client_id
            name = agent.client_name or urlsplit(client_id).hostname or "An agent"
            scopes = ", ".join(escape(s) for s in agent.scopes)
            items.append(
                f"<li><strong>{escape(name)}</strong> ({escape(urlsplit(client_id).hostname or client_id)})"
                f" may: {scopes}. Connected {agent.connected_at.strftime('%Y-%m-%d %H:%M')}"
                " UTC.\n"
                f'<form method="post" action="{ACCOUNT_PATH}/agents/disconnect">'
                f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
                f'<input type="hidden" name="client_id" value="{escape(client_id)}">'
                '<button type="submit">Disconnect</button></form></li>'
            )
        listing = "<ul>\n" + "\n".join(items) + "\n</ul>"
    return (
        f"<p>Signed in as {who}.</p>\n{listing}\n"
        "<p>Disconnecting an agent signs it out at once; it must ask you again to connect.</p>\n"
        f'<form method="post" action="{ACCOUNT_PATH}/logout">'
        f'<input type="hidden" name="csrf" value="{escape(csrf)}"><button type="submit">Sign out</button></form>'
    )


def account_router(config: NorthwindConfig, accounts: FrontdoorAccounts) -> Router:
    """``/account/login``, ``/account/agents``, ``/account/agents/disconnect``, ``/account/logout``.

    ``accounts`` is shared with the app, which closes it at shutdown.
    """
    signer = _Signer(config)
    secure = urlsplit(config.origin).scheme == "https"

    def session_cookie(value: str, max_age: int) -> Cookie:
        return Cookie(key=ACCOUNT_COOKIE, value=value, path=ACCOUNT_PATH, max_age=max_age, httponly=True,
                      secure=secure, samesite="lax")

    def signed_in(request: Request[Any, Any, Any]) -> tuple[str, str] | None:
        cookie = request.cookies.get(ACCOUNT_COOKIE)
        account_id = signer.account(cookie, time.time())
        return None if account_id is None or cookie is None else (account_id, cookie)

    def unavailable() -> Response[str]:
        return _page("Please try again", "<p>We could not reach our sign-in service. Try again in a moment.</p>",
                     status=503)

    @get(f"{ACCOUNT_PATH}/login")
    async def login_page() -> Response[str]:
        csrf = secrets.token_urlsafe(32)
        return _page("Your Northwind account", _login_form(csrf), cookies=[
            Cookie(key=LOGIN_CSRF_COOKIE, value=csrf, path=ACCOUNT_PATH, max_age=1800, httponly=True,
                   secure=secure, samesite="strict")])

    @post(f"{ACCOUNT_PATH}/login", status_code=200, request_max_body_size=16 * 1024)
    async def login_submit(request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        csrf, email, password = (_text(form.get(n)) for n in ("csrf", "email", "password"))
        cookie = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        if not cookie or not hmac.compare_digest(cookie.encode(), csrf.encode()):
            return _page("Please try again", f'<p>This form has expired. <a href="{ACCOUNT_PATH}/login">Sign in'
                                             "</a> again.</p>", status=403)
        account = catalog.demo_account(email)
        password_ok = hmac.compare_digest(password.encode(), config.demo_password.encode())
        if account is None or not password_ok:
            return _page("Your Northwind account",
                         _login_form(cookie, error="That email and password do not match a Northwind account."),
                         status=401)
        return Redirect(f"{ACCOUNT_PATH}/agents", status_code=303, headers=_HEADERS, cookies=[
            session_cookie(signer.cookie(account.account_id, time.time()), _LIFETIME_S),
            Cookie(key=LOGIN_CSRF_COOKIE, value="", path=ACCOUNT_PATH, max_age=0)])

    @get(f"{ACCOUNT_PATH}/agents")
    async def agents_page(request: Request[Any, Any, Any]) -> Response[Any]:
        who = signed_in(request)
        if who is None:
            return Redirect(f"{ACCOUNT_PATH}/login", status_code=303, headers=_HEADERS)
        account_id, cookie = who
        try:
            agents = await accounts.connected_agents(account_id)
        except (FrontdoorAccountsError, ValueError):
            return unavailable()
        account = next((a for a in catalog.DEMO_ACCOUNTS if a.account_id == account_id), None)
        return _page("Connected agents", _agents_list(account, account_id, agents, signer.csrf(cookie)))

    @post(f"{ACCOUNT_PATH}/agents/disconnect", status_code=200, request_max_body_size=16 * 1024)
    async def agents_disconnect(request: Request[Any, Any, Any]) -> Response[Any]:
        who = signed_in(request)
        if who is None:
            return Redirect(f"{ACCOUNT_PATH}/login", status_code=303, headers=_HEADERS)
        account_id, cookie = who
        form = await request.form()
        csrf, client_id = _text(form.get("csrf")), _text(form.get("client_id"))
        if not hmac.compare_digest(csrf.encode(), signer.csrf(cookie).encode()):
            return _page("Please try again", f'<p>This form has expired. <a href="{ACCOUNT_PATH}/agents">Reload'
                                             "</a> and try again.</p>", status=403)
        if not client_id:
            return Redirect(f"{ACCOUNT_PATH}/agents", status_code=303, headers=_HEADERS)
        try:
            await accounts.disconnect(account_id, client_id)
        except ValueError:  # not a client_id Frontdoor could know: nothing to disconnect
            pass
        except FrontdoorAccountsError:
            return unavailable()
        return Redirect(f"{ACCOUNT_PATH}/agents", status_code=303, headers=_HEADERS)

    @post(f"{ACCOUNT_PATH}/logout", status_code=200, request_max_body_size=16 * 1024)
    async def logout(request: Request[Any, Any, Any]) -> Response[Any]:
        who = signed_in(request)
        form = await request.form()
        if who is not None and hmac.compare_digest(_text(form.get("csrf")).encode(), signer.csrf(who[1]).encode()):
            return Redirect(f"{ACCOUNT_PATH}/login", status_code=303, headers=_HEADERS,
                            cookies=[session_cookie("", 0)])
        return Redirect(f"{ACCOUNT_PATH}/login", status_code=303, headers=_HEADERS)

    return Router("/", route_handlers=[login_page, login_submit, agents_page, agents_disconnect, logout],
                  include_in_schema=False)
