"""Northwind's login page: the company's side of Frontdoor's login handoff.

Frontdoor sends the user's browser to ``GET /login?request=<JWT>``. The page verifies the
request with the sdk (signed by the issuer, for this origin, fresh), asks for an email and
password, and on success answers a form that POSTs ``response=<JWT>`` (signed with
Northwind's own key, published at ``/.well-known/jwks.json``) to the request's
``return_to``: Frontdoor's ``{issuer}/login/callback``. Frontdoor never sees the password.

The page is plain HTML: no inline script or style, no third-party resource, a CSRF token
(double-submit cookie) on the form, the same answer for an unknown email and a wrong
password, and ``frame-ancestors 'none'``.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from datetime import datetime
from html import escape
from typing import Any, Final
from urllib.parse import urlsplit

from frontdoor_sdk import (
    Clock,
    IssuerKeySource,
    JwksUnavailable,
    LoginHandoffError,
    LoginRequest,
    build_login_response,
    login_jwks,
    verify_login_request,
)
from litestar import MediaType, Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.params import Parameter

from northwind import catalog
from northwind.config import NorthwindConfig
from northwind.protection import ORDERS_READ

__all__ = ["CSRF_COOKIE", "LOGIN_PATH", "login_router"]

LOGIN_PATH: Final = "/login"
CSRF_COOKIE: Final = "northwind_login_csrf"
_MAX_FIELD: Final = 1024
_MAX_TOKEN: Final = 8192
_MAX_BODY: Final = 16 * 1024
_SCOPE_WORDS: Final[Mapping[str, str]] = {
    ORDERS_READ: "see your orders",
    "poppy:read": "see your Northwind account",
    "poppy:write": "make changes in your Northwind account",
}
_CONTINUE_JS: Final = b'document.getElementById("handoff").submit();\n'
_WRONG_CREDENTIALS: Final = "That email and password do not match a Northwind account."


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} - Northwind</title></head>\n<body><main>\n<h1>{escape(title)}</h1>\n{body}\n"
        "</main></body></html>\n"
    )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class _Html:
    """Renders the pages with the headers every one of them needs."""

    def __init__(self, config: NorthwindConfig) -> None:
        # form-action: the login form posts here, the handoff form to Frontdoor's callback.
        self._csp = (
            "default-src 'none'; script-src 'self'; form-action 'self' "
            f"{_origin(config.issuer)}; frame-ancestors 'none'; base-uri 'none'"
        )
        self._secure = urlsplit(config.origin).scheme == "https"

    def respond(self, title: str, body: str, *, status: int = 200, csrf: str | None = None) -> Response[str]:
        cookies = []
        if csrf is not None:
            cookies.append(Cookie(key=CSRF_COOKIE, value=csrf, path=LOGIN_PATH, max_age=1800, httponly=True,
                                  secure=self._secure, samesite="strict"))
        return Response(
            _page(title, body),
            status_code=status,
            media_type=MediaType.HTML,
            cookies=cookies,
            headers={
                "Content-Security-Policy": self._csp,
                "X-Frame-Options": "DENY",
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",  # the page URL holds the request JWT
                "X-Content-Type-Options": "nosniff",
            },
        )

    def start_again(self, status: int = 400) -> Response[str]:
        return self.respond(
            "This sign-in link cannot be used",
            "<p>It has expired or is not valid. Go back to your agent and start signing in again.</p>",
            status=status,
        )

    def login_form(self, request: LoginRequest, token: str, csrf: str, *, error: str | None = None) -> Response[str]:
        scopes = "".join(f"<li>{escape(_SCOPE_WORDS.get(scope, scope))}</li>" for scope in request.scopes)
        alert = f'<p role="alert">{escape(error)}</p>\n' if error else ""
        body = (
            f"<p><strong>{escape(request.agent_name)}</strong> asks to connect to your Northwind account.</p>\n"
            f"<p>Once you sign in and agree, it may:</p>\n<ul>{scopes}</ul>\n{alert}"
            f'<form method="post" action="{LOGIN_PATH}">\n'
            f'<input type="hidden" name="request" value="{escape(token)}">\n'
            f'<input type="hidden" name="csrf" value="{escape(csrf)}">\n'
            '<p><label>Email <input type="email" name="email" autocomplete="username" required></label></p>\n'
            '<p><label>Password <input type="password" name="password" autocomplete="current-password" required>'
            "</label></p>\n"
            '<p><button type="submit">Sign in</button></p>\n</form>'
        )
        return self.respond("Sign in to Northwind", body, status=200 if error is None else 401, csrf=csrf)

    def handoff(self, return_to: str, response: str) -> Response[str]:
        body = (
            "<p>You are signed in. Continue to finish connecting your agent.</p>\n"
            f'<form id="handoff" method="post" action="{escape(return_to)}">\n'
            f'<input type="hidden" name="response" value="{escape(response)}">\n'
            '<p><button type="submit">Continue</button></p>\n</form>\n'
            f'<script src="{LOGIN_PATH}/continue.js"></script>'
        )
        return self.respond("Signed in", body)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _authenticate(email: str, password: str, demo_password: str) -> catalog.DemoAccount | None:
    """The account for these credentials; the password is compared even for an unknown email."""
    if len(email) > _MAX_FIELD or len(password) > _MAX_FIELD:
        return None
    account = catalog.demo_account(email)
    matches = hmac.compare_digest(password.encode(), demo_password.encode())
    return account if account is not None and matches else None


def login_router(config: NorthwindConfig, issuer_keys: IssuerKeySource, clock: Clock) -> Router:
    """``/login`` (the page), ``/login/continue.js`` and ``/.well-known/jwks.json``.

    Args:
        config: Northwind's configuration: issuer, origin, signing key, demo password.
        issuer_keys: The issuer's JWKS cache (:func:`frontdoor_sdk.issuer_key_source`).
        clock: The time source.
    """
    html = _Html(config)
    key = config.signing_key
    jwks = login_jwks(key)

    async def verified(token: str, now: datetime) -> LoginRequest | None:
        try:
            return await verify_login_request(
                token, issuer=config.issuer, issuer_keys=issuer_keys, login_origin=config.origin, now=now
            )
        except LoginHandoffError:
            return None

    @get(LOGIN_PATH)
    async def show(request_jwt: str | None = Parameter(query="request", default=None)) -> Response[str]:
        """The sign-in form for a verified request."""
        if not request_jwt or len(request_jwt) > _MAX_TOKEN:
            return html.start_again()
        try:
            checked = await verified(request_jwt, clock())
        except JwksUnavailable:
            return html.start_again(503)
        if checked is None:
            return html.start_again()
        return html.login_form(checked, request_jwt, secrets.token_urlsafe(32))

    @post(LOGIN_PATH, status_code=200, request_max_body_size=_MAX_BODY)
    async def submit(request: Request[Any, Any, Any]) -> Response[str]:
        """Check the CSRF token, the request again, then the credentials."""
        form = await request.form()
        token, csrf, email, password = (_text(form.get(name)) for name in ("request", "csrf", "email", "password"))
        if not token or len(token) > _MAX_TOKEN:
            return html.start_again()
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not hmac.compare_digest(cookie.encode(), csrf.encode()):
            return html.respond("Please try again", "<p>This form has expired. Open the sign-in link again.</p>",
                                status=403)
        now = clock()
        try:
            checked = await verified(token, now)
        except JwksUnavailable:
            return html.start_again(503)
        if checked is None:
            return html.start_again()
        account = _authenticate(email, password, config.demo_password)
        if account is None:
            return html.login_form(checked, token, cookie, error=_WRONG_CREDENTIALS)
        response = build_login_response(
            account_id=account.account_id,
            request_jti=checked.jti,
            login_origin=config.origin,
            issuer=config.issuer,
            key=key,
            kid=key.kid or "",
            now=now,
        )
        return html.handoff(checked.return_to, response)

    @get(f"{LOGIN_PATH}/continue.js")
    async def continue_js() -> Response[bytes]:
        """Submits the handoff form; without JavaScript the user presses Continue."""
        return Response(_CONTINUE_JS, media_type="text/javascript", headers={"Cache-Control": "max-age=3600"})

    @get("/.well-known/jwks.json")
    async def published_keys() -> Response[dict[str, Any]]:
        """The public login key: the tenant's ``login.jwks_uri`` points here."""
        return Response(jwks, media_type=MediaType.JSON, headers={"Cache-Control": "max-age=300"})

    return Router("/", route_handlers=[show, submit, continue_js, published_keys], include_in_schema=False)
