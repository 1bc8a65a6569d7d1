"""An operation's page (its ``url``): shown in the agent's browser joined to the Session (PAP §5, Operations §4.4).

``GET /operations/{operation_id}`` shows the operation, read from Frontdoor's ledger, to
a browser joined to a Session signed in to the operation's account, and nobody else: not
joined is ``401``, signed out ``403``, another account's or an unknown operation ``404``
(the same page). While it is ``proposed``, a form posts the shown ``revision`` back to the
same URL, which confirms it through the sdk's ``confirm_on_website``: the same
compare-and-set as the agent's confirm, so whichever channel confirms first wins and the
order is performed at most once (OPS-6-02).

The form carries a CSRF token bound to the Session and the operation, and a POST from
another origin is refused. A newer revision than the one shown is ``409`` with the new
terms: the user confirms what they saw, never something else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from html import escape
from typing import Any, Final

from frontdoor_sdk import (
    BrowserJoin,
    BrowserSession,
    BrowserStateUnavailable,
    BrowserView,
    FrontdoorLedger,
    LedgerRefused,
    LedgerUnavailable,
)
from litestar import Request, Response, Router, get, post

from northwind.browser import html_page, unavailable_page

__all__ = ["OPERATION_PAGE_PATH", "operation_page_router"]

OPERATION_PAGE_PATH: Final = "/operations/{operation_id:str}"
_MAX_FORM: Final = 4_096


class _NotShown(Exception):
    def __init__(self, response: Response[str]) -> None:
        super().__init__("not shown")
        self.response = response


def _terms_html(operation: dict[str, Any]) -> str:
    terms = operation.get("terms")
    items = terms.get("items") if isinstance(terms, dict) else None
    if not isinstance(items, list):
        return ""
    rows = "".join(
        f"<tr><td>{escape(str(item.get('quantity', '')))}</td><td>{escape(str(item.get('name', '')))}</td>"
        f"<td>{escape(str(item.get('unit_price', '')))}</td></tr>"
        for item in items if isinstance(item, dict)
    )
    total = terms.get("total") if isinstance(terms, dict) else None
    total_html = ""
    if isinstance(total, dict):
        total_html = f"<p>Total: {escape(str(total.get('amount', '')))} {escape(str(total.get('currency', '')))}</p>"
    return f"<table><tr><th>Qty</th><th>Product</th><th>Unit price</th></tr>{rows}</table>{total_html}"


def operation_page_router(origin: str, browser: BrowserJoin, ledger: FrontdoorLedger) -> Router:
    """The operation pages.

    Args:
        origin: Northwind's public origin (a confirming POST must come from it).
        browser: The sdk's browser join (who this browser is).
        ledger: The sdk's ledger client (the operation, and confirming it).
    """
    csrf_key = secrets.token_bytes(32)  # per process: forms outlive no restart, which is fine here

    def csrf(session: BrowserSession, operation_id: str) -> str:
        return hmac.new(csrf_key, f"{session.session_id}\x00{operation_id}".encode(), hashlib.sha256).hexdigest()

    async def signed_in(request: Request[Any, Any, Any]) -> tuple[BrowserSession, BrowserView]:
        try:
            view = await browser.view(request.headers.get("cookie"))
        except BrowserStateUnavailable as exc:
            raise _NotShown(unavailable_page(exc)) from None
        session = view.session
        if session is None:
            raise _NotShown(html_page("Not joined", "<p>Open this page from your agent's browser.</p>",
                                      status=401, headers=view.headers))
        if not session.signed_in or session.account is None:
            raise _NotShown(html_page("Signed out", "<p>Your agent's browser is signed out.</p>",
                                      status=403, headers=view.headers))
        return session, view

    async def owned(session: BrowserSession, operation_id: str) -> dict[str, Any]:
        try:
            record = await ledger.get(operation_id)
        except LedgerUnavailable as exc:
            raise _NotShown(html_page("Please try again", "<p>We could not load this just now.</p>", status=503,
                                      headers={"Retry-After": str(exc.retry_after)})) from None
        except (LedgerRefused, ValueError):
            record = None
        if record is None or record.details.account != session.account:
            raise _NotShown(html_page("Not found", "<p>There is no such operation.</p>", status=404))
        return record.operation

    def render(session: BrowserSession, view: BrowserView, operation: dict[str, Any], *, status: int = 200,
               notice: str | None = None) -> Response[str]:
        operation_id = str(operation.get("operation_id", ""))
        state = str(operation.get("state", ""))
        parts = [f"<p>{escape(notice)}</p>"] if notice else []
        parts.append(f"<p>{escape(str(operation.get('summary', '')))}</p>")
        parts.append(_terms_html(operation))
        parts.append(f"<p>State: <strong>{escape(state)}</strong>, revision {escape(str(operation.get('revision')))}"
                     "</p>")
        result = operation.get("result")
        if isinstance(result, dict) and result.get("summary"):
            parts.append(f"<p>{escape(str(result['summary']))}</p>")
        if state == "proposed":
            action = escape(f"/operations/{operation_id}")
            parts.append(
                f'<form method="post" action="{action}">'
                f'<input type="hidden" name="csrf" value="{csrf(session, operation_id)}">'
                f'<input type="hidden" name="revision" value="{escape(str(operation.get("revision", "")))}">'
                "<button type=\"submit\">Confirm</button></form>"
                "<p>Confirming here is the same as your agent confirming: it happens at most once.</p>"
            )
        return html_page("Your order", "\n".join(parts), status=status, headers=view.headers)

    @get(OPERATION_PAGE_PATH)
    async def show(request: Request[Any, Any, Any], operation_id: str) -> Response[str]:
        """The operation, for the browser of a Session signed in to its account."""
        try:
            session, view = await signed_in(request)
            return render(session, view, await owned(session, operation_id))
        except _NotShown as not_shown:
            return not_shown.response

    @post(OPERATION_PAGE_PATH, request_max_body_size=_MAX_FORM)
    async def confirm(request: Request[Any, Any, Any], operation_id: str) -> Response[str]:
        """Confirm the revision the page showed, then show the operation as it is now."""
        try:
            session, view = await signed_in(request)
            origin = request.headers.get("origin")
            if origin is not None and origin != origin_value:
                return html_page("Refused", "<p>This form must be sent from Northwind's own page.</p>", status=403)
            form = await request.form()
            token, revision = form.get("csrf"), form.get("revision")
            if not isinstance(token, str) or not hmac.compare_digest(token, csrf(session, operation_id)):
                return html_page("Refused", "<p>This form has expired: open the page again.</p>", status=403)
            if not isinstance(revision, str) or not revision.isdigit() or not 0 < int(revision) < 1_000_000:
                return html_page("Refused", "<p>The form is incomplete.</p>", status=400)
            await owned(session, operation_id)
            try:
                current = await ledger.confirm_on_website(operation_id, int(revision), session.session_id)
            except LedgerUnavailable as exc:
                return html_page("Please try again", "<p>We could not confirm this just now.</p>", status=503,
                                 headers={"Retry-After": str(exc.retry_after)})
            except LedgerRefused as refused:
                if refused.code == "terms_changed" and refused.operation is not None:
                    return render(session, view, refused.operation, status=409,
                                  notice="The terms changed since you opened this page: here are the new ones.")
                if refused.status == 404:
                    return html_page("Not found", "<p>There is no such operation.</p>", status=404)
                return html_page("Not confirmed", "<p>This operation cannot be confirmed here.</p>", status=409)
            return render(session, view, current, notice="Confirmed.")
        except _NotShown as not_shown:
            return not_shown.response

    origin_value = origin.rstrip("/")
    return Router("/", route_handlers=[show, confirm], include_in_schema=False)
