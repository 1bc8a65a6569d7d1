"""What every dashboard page shares: the signed-in admin, rendering, refusals, confirmations.

Every page and fragment reads the tenant from the signed-in admin's session, never from
the URL. Roles are enforced before a handler runs (`frontdoor_console.access`); handlers
that change something call `Console.require` too, naming what they need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frontdoor_core.errors import DomainError
from frontdoor_httpkit import current_request_id
from frontdoor_tenancy import admins, tenants
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import Permission, can, require
from litestar import Request, Response
from litestar.datastructures import State
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from .admin_web import current_admin
from .deps import ctx_of

__all__ = [
    "EXCEPTION_HANDLERS",
    "FORM",
    "Console",
    "SignedOut",
    "confirm_page",
    "error_page",
    "is_htmx",
    "provide_console",
]

FORM = Body(media_type=RequestEncodingType.URL_ENCODED)


class SignedOut(Exception):
    """No valid admin session: go to the sign-in page."""


@dataclass(frozen=True)
class Console:
    """The signed-in admin of this request and their tenant."""

    session: admins.AdminSession
    tenant: tenants.Tenant
    actor: Actor

    @property
    def can_write(self) -> bool:
        return can(self.actor.role, "write")

    @property
    def is_owner(self) -> bool:
        return can(self.actor.role, "manage_members")

    def require(self, permission: Permission) -> None:
        """Raise `Forbidden` (a 403 page) unless the admin's role grants ``permission``."""
        require(self.actor, permission)

    def page(self, template: str, *, nav: str, status_code: int = 200, **context: Any) -> Template:
        return Template(template, status_code=status_code, context={
            "nav": nav, "tenant": self.tenant, "admin": self.session.admin, "can_write": self.can_write,
            "is_owner": self.is_owner, **context,
        })


async def provide_console(request: Request[Any, Any, Any], state: State) -> Console:
    session = await current_admin(request, state)
    if session is None:
        raise SignedOut
    async with ctx_of(state).pool.acquire() as conn:
        tenant = await tenants.get_tenant(conn, session.admin.tenant_id)
    actor = Actor(tenant_id=tenant.id, type="admin", id=session.admin.id, role=session.admin.role,
                  request_id=current_request_id())
    return Console(session=session, tenant=tenant, actor=actor)


def is_htmx(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get("hx-request") == "true"


def confirm_page(console: Console, *, nav: str, title: str, message: str, subject: str, action: str, button: str,
                 cancel: str, danger: bool = True, fields: dict[str, str] | None = None) -> Template:
    """The confirmation step of a destructive action: posting ``confirm=yes`` to ``action`` does it."""
    return console.page("confirm.html", nav=nav, title=title, message=message, subject=subject, action=action,
                        button=button, cancel=cancel, danger=danger, fields=fields or {})


def error_page(status: int, title: str, message: str) -> Template:
    return Template("error.html", status_code=status, context={"title": title, "message": message},
                    headers={"Cache-Control": "no-store"})


def _on_signed_out(request: Request[Any, Any, Any], _: Exception) -> Response[Any]:
    if is_htmx(request):
        return Response("", status_code=401, headers={"HX-Redirect": "/login"})
    return Redirect("/login", status_code=303)


def _on_domain_error(_: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, DomainError)
    if exc.kind == "forbidden":
        return error_page(403, "Not allowed", exc.detail)
    status = {"not_found": 404, "conflict": 409, "rate_limited": 429, "unavailable": 503}.get(exc.kind, 422)
    return error_page(status, "That did not work", exc.detail)


EXCEPTION_HANDLERS: dict[Any, Any] = {SignedOut: _on_signed_out, DomainError: _on_domain_error}
