"""Who is acting: recorded on every audit row."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["Actor", "Role", "SYSTEM"]

Role = Literal["owner", "admin", "viewer"]


class Actor(msgspec.Struct, frozen=True, kw_only=True):
    """The authenticated principal of one request or job.

    Attributes:
        tenant_id: the tenant the actor belongs to; every use case scopes by it.
        type: ``admin`` (browser), ``api_key`` (management API) or ``system`` (worker).
        id: admin ID or API key ID; None for the system.
        role: what the actor may do (an API key acts with the role stored with it).
        request_id: correlates the audit row with logs and traces.
    """

    tenant_id: str
    type: Literal["admin", "api_key", "system"]
    id: str | None = None
    role: Role = "admin"
    request_id: str | None = None

    @property
    def can_write(self) -> bool:
        """Viewers change nothing (the rule lives in `frontdoor_tenancy.roles`)."""
        from .roles import can

        return self.type == "system" or can(self.role, "write")


SYSTEM = "system"
