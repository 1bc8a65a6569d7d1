"""The website for agents' browsers (PAP §5): the join endpoint and the pages that follow it.

- ``POST /poppy/browser``: the ``web.browser_session_endpoint`` of Northwind's
  ``poppy.json``. An agent's own browser posts its browser assertion here; the sdk's
  :class:`frontdoor_sdk.BrowserJoin` has Frontdoor verify it, sets the cookie and sends the
  browser on to ``return_to`` (303).
- ``GET /session``: what this browser is: signed in as whom, signed out, or not joined.
- ``/operations/{operation_id}``: an operation's page (its ``url``), in
  :mod:`northwind.operation_page`.

Every view asks Frontdoor about the Session, so a sign-out shows on the next page and the
cookie is deleted once the Session has ended. Pages load nothing and cannot be framed.
"""

from __future__ import annotations

from html import escape
from typing import Any, Final

from frontdoor_sdk import BrowserJoin, BrowserSession, BrowserStateUnavailable
from litestar import MediaType, Request, Response, Router, get, post

from northwind import catalog

__all__ = ["BROWSER_SESSION_PATH", "SESSION_PAGE_PATH", "browser_router", "html_page", "unavailable_page"]

BROWSER_SESSION_PATH: Final = "/poppy/browser"
SESSION_PAGE_PATH: Final = "/session"
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def html_page(title: str, body: str, *, status: int = 200, headers: dict[str, str] | None = None) -> Response[str]:
    """A page for agents' browsers: ``title`` is escaped, ``body`` is HTML the caller escaped."""
    html = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - Northwind</title></head>\n<body><main>\n<h1>{escape(title)}</h1>\n{body}\n"
        "</main></body></html>\n"
    )
    return Response(html, status_code=status, media_type=MediaType.HTML, headers={**_HEADERS, **(headers or {})})


def unavailable_page(exc: BrowserStateUnavailable) -> Response[str]:
    """503 with ``Retry-After``: Frontdoor could not tell what the browser is (fail closed)."""
    return html_page("Please try again", "<p>We could not check your session just now.</p>", status=503,
                 headers={"Retry-After": str(exc.retry_after)})


def _who(session: BrowserSession) -> str:
    account = next((a for a in catalog.DEMO_ACCOUNTS if a.account_id == session.account), None)
    name = account.name if account is not None else session.account or ""
    return f"signed in as {name}"


def browser_router(browser: BrowserJoin) -> Router:
    """The join endpoint and the pages of agents' browsers.

    Args:
        browser: The sdk's browser join, created at start-up.
    """

    @post(BROWSER_SESSION_PATH, status_code=303, request_max_body_size=16 * 1024)
    async def join(request: Request[Any, Any, Any]) -> Response[bytes]:
        """Join the posting browser to its agent's Session; Frontdoor checks the assertion."""
        answer = await browser.join(await request.body(), content_type=request.headers.get("content-type"))
        return Response(answer.body, status_code=answer.status, headers={**_HEADERS, **answer.headers})

    @get(SESSION_PAGE_PATH)
    async def session_page(request: Request[Any, Any, Any]) -> Response[str]:
        """This browser's state: signed in (as whom), signed out, or not joined."""
        try:
            view = await browser.view(request.headers.get("cookie"))
        except BrowserStateUnavailable as exc:
            return unavailable_page(exc)
        session = view.session
        if session is None:
            text = "This browser is not joined to an agent's session."
        elif session.signed_in:
            text = f"Your agent's browser is {_who(session)}."
        else:
            text = "Your agent's browser is signed out."
        return html_page("Your session", f"<p>{escape(text)}</p>", headers=view.headers)

    return Router("/", route_handlers=[join, session_page], include_in_schema=False)
