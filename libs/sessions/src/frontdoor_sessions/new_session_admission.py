"""Whether a tenant may start *new* Sessions now: a hook the service fills (billing, docs/billing.md).

`frontdoor_sessions` knows nothing of bills. A service hands its grants an
`Admission`: called with the tenant's ID only when a request would create a Session
(a 0.2 jwt-bearer grant without ``session_id``, once the client is authenticated; a PAP
1.0 Session seen for the first time), it answers ``None`` to admit, or the seconds of
``Retry-After`` to send with ``503 temporarily_unavailable``. Existing Sessions are never
asked about: renewal, state lookups, sign-in and refresh go on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

__all__ = ["Admission", "NewSessionRefused"]

Admission = Callable[[str], Awaitable[int | None]]
"""``tenant_id -> None`` (admitted) or the ``Retry-After`` seconds of a refusal."""


class NewSessionRefused(Exception):
    """A request would have created a Session the tenant may not start now; nothing was written."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("new Sessions are not admitted")
        self.retry_after = retry_after
