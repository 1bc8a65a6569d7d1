"""Domain errors: what went wrong, in domain words. The HTTP edge maps codes to responses."""

from __future__ import annotations

from typing import Any

__all__ = ["Conflict", "DomainError", "Forbidden", "NotFound", "RateLimited", "Unavailable", "Invalid"]


class DomainError(Exception):
    """Base of every expected failure of a use case.

    Attributes:
        code: stable snake_case identifier clients can branch on.
        detail: a human sentence; never contains a secret or echoed input.
        fields: optional per-field messages (validation).
    """

    kind = "invalid"

    def __init__(self, code: str, detail: str, *, fields: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.fields = fields or {}
        self.extra = extra


class Invalid(DomainError):
    """The input is well-formed but not acceptable (422)."""

    kind = "invalid"


class NotFound(DomainError):
    """No such object for this tenant (404). Indistinguishable from another tenant's object."""

    kind = "not_found"


class Conflict(DomainError):
    """The change conflicts with current state (409)."""

    kind = "conflict"


class Forbidden(DomainError):
    """The actor may not do this (403)."""

    kind = "forbidden"


class RateLimited(DomainError):
    """Too many attempts; ``retry_after`` seconds (429)."""

    kind = "rate_limited"

    def __init__(self, code: str, detail: str, *, retry_after: int) -> None:
        super().__init__(code, detail)
        self.retry_after = retry_after


class Unavailable(DomainError):
    """A dependency is down; fail closed (503)."""

    kind = "unavailable"

    def __init__(self, code: str, detail: str, *, retry_after: int = 5) -> None:
        super().__init__(code, detail)
        self.retry_after = retry_after
