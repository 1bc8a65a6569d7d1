"""Your website's side of the browser join (PAP §5): an agent's browser joins its Session.

A personal agent that browses your website first joins its own browser to its Session: the
browser form-POSTs ``assertion=<JWT>`` (``typ`` ``poppy-browser+jwt``) to your
``web.browser_session_endpoint``. :class:`BrowserJoin` answers that POST and then tells
your pages, on every view, whether that browser is signed in and as whom.

Frontdoor does the checking: :meth:`BrowserJoin.join` hands the assertion to
``POST {issuer}/browser/verify`` with your resource-server credential. Frontdoor resolves
the agent's metadata and keys (fetched SSRF-safely), checks the signature, ``typ``,
``aud`` (your endpoint, as set in your issuer settings), a lifetime of at most 60 s, the
one-use ``jti``, that the Session is live and the agent's and User's, and that
``return_to`` is on one of your verified domains. It answers an opaque *browser session*
token, which becomes the cookie (``__Host-poppy-browser``: ``Secure; HttpOnly;
SameSite=Lax; Path=/``, no ``Max-Age`` of its own), and the browser is sent on to
``return_to`` with 303 See Other.

:meth:`BrowserJoin.view` reads that cookie and asks ``POST {issuer}/browser/state`` on
every page view, so the page follows the Session: signed in, signed out, its scopes. Once
the Session has ended the answer is "no Session" and the cookie is deleted (PAP-5-10,
PAP-5-11). Like the verifier it fails closed: no answer from Frontdoor is
:class:`BrowserStateUnavailable`, never "signed in".

Example (any framework)::

    browser = BrowserJoin(ISSUER, credential)        # once, at start-up; aclose() at shutdown

    # POST /poppy/browser
    answer = await browser.join(await request.body(), content_type=request.headers.get("content-type"))
    return Response(answer.body, status=answer.status, headers=answer.headers)

    # any page
    view = await browser.view(request.headers.get("cookie"))
    if view.session is not None and view.session.signed_in: ...   # view.session.account
    # send view.headers with the page (they delete a dead cookie)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

import httpx
import msgspec
from frontdoor_protocol.https_url import UrlProblem, https_url_problem

from frontdoor_sdk._browser_join_common import (
    check_cookie_name,
    cookie_value,
    expired_cookie,
    form_assertion,
    granted_scopes,
    set_cookie,
)

__all__ = [
    "BROWSER_COOKIE",
    "BrowserAnswer",
    "BrowserJoin",
    "BrowserSession",
    "BrowserStateUnavailable",
    "BrowserView",
    "read_cookie",
]

BROWSER_COOKIE: Final = "__Host-poppy-browser"
"""The cookie's name: ``__Host-`` makes browsers insist on ``Secure``, ``Path=/`` and no ``Domain``."""

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_ANSWER: Final = 64 * 1024
_MAX_COOKIE: Final = 1024
_NO_STORE: Final = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
_REFUSED_PAGE: Final = (
    b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Not joined</title></head>\n"
    b"<body><h1>This browser could not join the agent's session</h1>\n"
    b"<p>The link is not valid, has expired or was already used. Ask the agent to try again.</p></body></html>\n"
)
_UNAVAILABLE_PAGE: Final = (
    b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Try again</title></head>\n"
    b"<body><h1>Please try again in a moment</h1></body></html>\n"
)


class BrowserStateUnavailable(Exception):
    """Frontdoor did not answer usably: serve 503 (with ``Retry-After``), never a signed-in page.

    Attributes:
        retry_after: Seconds to suggest in ``Retry-After``.
    """

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class BrowserSession:
    """The Session a browser joined, as it is now.

    Attributes:
        client_id: The personal agent whose browser this is.
        user_id: The agent's User ID for this user (not an account).
        session_id: The Session.
        signed_in: Whether the Session is signed in to an account now.
        account: Your account ID when signed in, else ``None``.
        scopes: What the user consented to (empty when signed out).
    """

    client_id: str
    user_id: str
    session_id: str
    signed_in: bool
    account: str | None
    scopes: frozenset[str]


@dataclass(frozen=True)
class BrowserAnswer:
    """The complete HTTP answer to the join POST: send it as it is.

    Attributes:
        status: 303 (joined), 400 (refused: no cookie), 503 (Frontdoor unavailable) or
            500 (Frontdoor refused your credential: a configuration error).
        headers: ``Location`` and ``Set-Cookie`` when joined; ``Cache-Control`` always.
        body: A short HTML page (empty for a 303).
        session: The Session joined, when joined.
        reason: Why it was refused, for your logs (never a value from the assertion).
    """

    status: int
    headers: dict[str, str]
    body: bytes = b""
    session: BrowserSession | None = None
    reason: str | None = None


@dataclass(frozen=True)
class BrowserView:
    """What a page view knows about the browser.

    Attributes:
        session: The joined Session, or ``None`` (no cookie, or the Session has ended).
        headers: Send these with the page: they delete a cookie whose Session ended.
    """

    session: BrowserSession | None
    headers: dict[str, str] = field(default_factory=dict)


class _State(msgspec.Struct, frozen=True, kw_only=True):
    active: bool
    client_id: str | None = None
    sub: str | None = None
    sid: str | None = None
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None


class _Joined(msgspec.Struct, frozen=True, kw_only=True):
    browser_session: str
    return_to: str
    state: _State


class _Refused(msgspec.Struct, frozen=True, kw_only=True):
    reason: str = "refused"


def _session(state: _State) -> BrowserSession | None:
    if not state.active or not state.client_id or not state.sub or not state.sid:
        return None
    signed_in = state.signed_in and state.account is not None
    scopes = granted_scopes(signed_in, state.scope)
    return BrowserSession(client_id=state.client_id, user_id=state.sub, session_id=state.sid, signed_in=signed_in,
                          account=state.account if signed_in else None, scopes=scopes)


def _safe_location(url: str) -> bool:
    # Frontdoor checked it is on your domains; never send a header that is not a plain URL.
    return url.isascii() and https_url_problem(url) in (None, UrlProblem.HAS_FRAGMENT)


def _cookie_token(value: str) -> bool:
    return 0 < len(value) <= _MAX_COOKIE and all(c.isalnum() or c in "-_." for c in value)


def read_cookie(cookie_header: str | None, name: str = BROWSER_COOKIE) -> str | None:
    """The browser session token in a ``Cookie`` header, or ``None``."""
    value = cookie_value(cookie_header, name)
    return value if value is not None and _cookie_token(value) else None


class BrowserJoin:
    """Joins agents' browsers to their Sessions, and tells your pages their state.

    Create one at start-up and share it; close it with :meth:`aclose`.

    Args:
        issuer: Your Frontdoor issuer, ``auth.issuer`` in ``poppy.json``.
        credential: Your resource-server credential (``fdrs_...``).
        http: The client to reach Frontdoor with; one is created if omitted.
        cookie_name: The cookie's name; keep the ``__Host-`` prefix.
        timeout: Seconds one call to Frontdoor may take.
    """

    def __init__(self, issuer: str, credential: str, *, http: httpx.AsyncClient | None = None,
                 cookie_name: str = BROWSER_COOKIE, timeout: float = 5.0) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        if not issuer or issuer.endswith("/"):
            raise ValueError("issuer must be your Frontdoor issuer URL, without a trailing slash")
        check_cookie_name(cookie_name)
        self._verify_url = f"{issuer}/browser/verify"
        self._state_url = f"{issuer}/browser/state"
        self._authorization = f"Bearer {credential}"
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._timeout = timeout
        self.cookie_name = cookie_name

    def __repr__(self) -> str:
        return f"BrowserJoin({self._verify_url!r})"  # Never the credential.

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> BrowserJoin:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def expired_cookie(self) -> str:
        """A ``Set-Cookie`` value that deletes the browser's cookie."""
        return expired_cookie(self.cookie_name)

    async def _ask(self, url: str, form: dict[str, str]) -> httpx.Response:
        try:
            response = await self._http.post(
                url, data=form, timeout=self._timeout, follow_redirects=False,
                headers={"Authorization": self._authorization, "Accept": "application/json"},
            )
        except httpx.HTTPError as failure:
            _LOG.warning("frontdoor_sdk: the browser join could not reach Frontdoor: %s", type(failure).__name__)
            raise BrowserStateUnavailable("Frontdoor could not be reached") from None
        if response.status_code in (401, 403):
            _LOG.error("frontdoor_sdk: Frontdoor refused the resource-server credential (HTTP %s)",
                       response.status_code)
        if len(response.content) > _MAX_ANSWER:
            raise BrowserStateUnavailable("Frontdoor answered too much")
        return response

    async def join(self, body: bytes, *, content_type: str | None) -> BrowserAnswer:
        """Answer the browser's POST to your browser session endpoint.

        Args:
            body: The raw request body (a form with ``assertion``).
            content_type: The request's ``Content-Type``.

        Returns:
            The answer to send: 303 to ``return_to`` with the cookie, or a refusal
            without one.
        """
        html = {**_NO_STORE, "Content-Type": "text/html; charset=utf-8"}
        assertion = form_assertion(body, content_type)
        if assertion is None:
            return BrowserAnswer(400, html, _REFUSED_PAGE, reason="malformed_request")
        try:
            response = await self._ask(self._verify_url, {"assertion": assertion})
        except BrowserStateUnavailable:
            return BrowserAnswer(503, {**html, "Retry-After": "5"}, _UNAVAILABLE_PAGE, reason="unavailable")
        if response.status_code == 400:
            try:
                reason = msgspec.json.decode(response.content, type=_Refused).reason
            except (msgspec.DecodeError, msgspec.ValidationError):
                reason = "refused"
            return BrowserAnswer(400, html, _REFUSED_PAGE, reason=reason[:64])
        if response.status_code in (401, 403):
            return BrowserAnswer(500, html, _UNAVAILABLE_PAGE, reason="credential_refused")
        if response.status_code != 200:
            return BrowserAnswer(503, {**html, "Retry-After": "5"}, _UNAVAILABLE_PAGE, reason="unavailable")
        try:
            joined = msgspec.json.decode(response.content, type=_Joined)
        except (msgspec.DecodeError, msgspec.ValidationError):
            joined = None
        session = _session(joined.state) if joined is not None else None
        if joined is None or session is None or not _cookie_token(joined.browser_session) \
                or not _safe_location(joined.return_to):
            _LOG.warning("frontdoor_sdk: Frontdoor's browser join answer was malformed")
            return BrowserAnswer(503, {**html, "Retry-After": "5"}, _UNAVAILABLE_PAGE, reason="unavailable")
        headers = {**_NO_STORE, "Location": joined.return_to, "Set-Cookie": set_cookie(self.cookie_name, joined.browser_session)}
        return BrowserAnswer(303, headers, session=session)

    async def view(self, cookie_header: str | None) -> BrowserView:
        """The Session this browser joined, as it is now.

        Args:
            cookie_header: The request's ``Cookie`` header.

        Returns:
            The Session, or ``None`` without a (live) join; :attr:`BrowserView.headers`
            delete a cookie whose Session ended.

        Raises:
            BrowserStateUnavailable: Frontdoor did not answer: answer 503, never assume.
        """
        token = read_cookie(cookie_header, self.cookie_name)
        if token is None:
            return BrowserView(None)
        response = await self._ask(self._state_url, {"browser_session": token})
        if response.status_code != 200:
            raise BrowserStateUnavailable(f"Frontdoor answered HTTP {response.status_code}")
        try:
            state = msgspec.json.decode(response.content, type=_State)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise BrowserStateUnavailable("Frontdoor answered a malformed state") from None
        session = _session(state)
        if session is None:
            return BrowserView(None, {"Set-Cookie": self.expired_cookie()})
        return BrowserView(session)
