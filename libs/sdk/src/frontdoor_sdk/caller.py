"""Who is calling: the verified agent, user and Session behind one request."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import msgspec
from frontdoor_protocol import ErrorCode, ProtocolError, format_scope

__all__ = ["Caller", "Profile", "check_scopes"]


Profile = Literal["0.2", "1.0"]
"""The PAP version a request was made under."""


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """A request's verified caller, with its Session's state at the time of the request.

    Attributes:
        client_id: The personal agent's ``client_id`` (an HTTPS URL).
        user_id: The agent's User ID for the user: in 0.2 the pairwise ID of PAP §4.2, in
            1.0 the Session JWT's ``sub``. Stable per agent and user, not an account.
        session_id: The Session's ID: in 0.2 Frontdoor's ``ses_...``, in 1.0 the ``sid``
            the agent chose (unique per ``client_id`` only).
        signed_in: Whether the Session is signed in to an account now (1.0: the request
            carried a live access token).
        account: Your account ID for the user when signed in, else ``None``.
        scopes: What the user consented to (empty when signed out).
        token_type: The scheme the token came with: ``"DPoP"``, or ``"Bearer"`` at an MCP
            server without DPoP support (and for a 1.0 Bearer access token); ``None`` for
            a 1.0 request without an access token.
        profile: ``"0.2"`` (Session Token) or ``"1.0"`` (``Poppy-Session`` JWT).
        agent_id: The agent instance the 1.0 Session JWT names, if it names one.
        frontdoor_session_id: Frontdoor's ``ses_...`` ID of the Session: the one the
            dashboard shows and the ledger keys operations by (equal to ``session_id``
            in 0.2).
    """

    client_id: str
    user_id: str
    session_id: str
    signed_in: bool
    account: str | None
    scopes: frozenset[str]
    token_type: Literal["DPoP", "Bearer"] | None
    profile: Profile = "0.2"
    agent_id: str | None = None
    frontdoor_session_id: str | None = None

    def __post_init__(self) -> None:
        if self.frontdoor_session_id is None and self.profile == "0.2":
            msgspec.structs.force_setattr(self, "frontdoor_session_id", self.session_id)

    def has_scopes(self, *scopes: str) -> bool:
        """Whether the Session is signed in and holds every one of ``scopes``."""
        return self.signed_in and self.scopes.issuperset(scopes)


def check_scopes(caller: Caller, required: Iterable[str]) -> ProtocolError | None:
    """The refusal a request needing ``required`` gets from ``caller``, or ``None``.

    A signed-out Session gets ``sign_in_required`` (PAP §4.3, §4.9); a signed-in one
    without every scope gets ``insufficient_scope``; both name the needed scopes in
    ``scope`` (RFC 6750 §3.1). Use it for checks finer than a route, such as one MCP tool.

    Args:
        caller: The verified caller.
        required: Scopes the request needs, all of them; empty means signed out is fine.

    Returns:
        ``None`` when allowed, else the error to answer with (see :func:`refusal`).

    Raises:
        ValueError: If a required scope is not a scope-token.
    """
    needed = tuple(dict.fromkeys(required))
    if not needed:
        return None
    scope = format_scope(needed)
    if not caller.signed_in:
        return ProtocolError(ErrorCode.SIGN_IN_REQUIRED, "this request needs a signed-in Session", scope=scope)
    if not caller.scopes.issuperset(needed):
        return ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, "this request needs a scope the Session lacks", scope=scope)
    return None
