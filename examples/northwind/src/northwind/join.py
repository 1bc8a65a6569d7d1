"""PAP 1.0 browser joins (ADR 0004 §8): the callback Frontdoor's hosted join ends at.

Frontdoor hosts the join itself (``{issuer}/join``, advertised in a 1.0 ``poppy.json``);
the joined browser arrives here with a form POST of a join assertion:

- ``POST /poppy/join``: Northwind's ``protocol.join_callback_url``. The sdk's
  :class:`frontdoor_sdk.JoinCallback` verifies the assertion, sets Northwind's own cookie
  and sends the browser on to ``/joined`` (303).
- ``GET /joined``: who drives this browser: the agent as a guest, or signed in to an
  account (only when the agent's join carried a live access token). Every view asks
  Frontdoor about the Session, so the cookie dies with it.
"""

from __future__ import annotations

from html import escape
from typing import Any, Final

from frontdoor_sdk import JoinCallback, JoinedBrowser, JoinStateUnavailable
from litestar import Request, Response, Router, get, post

from northwind.browser import html_page

__all__ = ["JOIN_CALLBACK_PATH", "JOINED_PAGE_PATH", "join_router"]

JOIN_CALLBACK_PATH: Final = "/poppy/join"
JOINED_PAGE_PATH: Final = "/joined"


def _who(browser: JoinedBrowser) -> str:
    if browser.is_guest:  # never treat a guest as a user
        return "Your agent's browser is a guest: it is not signed in to an account."
    scopes = ", ".join(sorted(browser.scopes)) or "no scopes"
    return f"Your agent's browser is signed in as {browser.account} ({scopes})."


def join_router(join: JoinCallback) -> Router:
    """The join callback and the page after it.

    Args:
        join: The sdk's join callback, created at start-up.
    """

    @post(JOIN_CALLBACK_PATH, status_code=303, request_max_body_size=16 * 1024)
    async def callback(request: Request[Any, Any, Any]) -> Response[bytes]:
        answer = await join.receive(await request.body(), content_type=request.headers.get("content-type"))
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    @get(JOINED_PAGE_PATH)
    async def joined(request: Request[Any, Any, Any]) -> Response[str]:
        try:
            view = await join.view(request.headers.get("cookie"))
        except JoinStateUnavailable as exc:
            return html_page("Please try again", "<p>We could not check your session just now.</p>", status=503,
                             headers={"Retry-After": str(exc.retry_after)})
        text = _who(view.browser) if view.browser is not None else "This browser is not joined to an agent's session."
        return html_page("Your agent's browser", f"<p>{escape(text)}</p>", headers=view.headers)

    return Router("/", route_handlers=[callback, joined], include_in_schema=False)
