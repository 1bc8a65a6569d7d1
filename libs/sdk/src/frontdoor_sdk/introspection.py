"""The Session's current state, from Frontdoor's introspection endpoint.

``POST {issuer}/oauth/introspect`` with the company's resource-server credential
(``Authorization: Bearer fdrs_...``) and ``token=<Session Token>`` (RFC 7662 §2.1, plus
PAP fields: ``sid``, ``signed_in``, ``account``). Asked on every request by default, so a
sign-out takes effect on the very next one (PAP-4.9-01). It fails closed: anything but a
well-formed answer is :class:`IntrospectionUnavailable`, never "allow".
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from frontdoor_sdk._frontdoor_call import FrontdoorHTTP, Unavailable, decode_answer, post

__all__ = ["IntrospectionRefused", "IntrospectionUnavailable", "Introspector", "SessionState"]

_MAX_BYTES: Final = 64 * 1024


class IntrospectionUnavailable(Unavailable):
    """Frontdoor did not answer usably (network, 429, 5xx, malformed): answer 503.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """


class IntrospectionRefused(Exception):
    """Frontdoor refused the resource-server credential (401/403): a configuration error."""


class _Confirmation(msgspec.Struct, frozen=True):
    jkt: str


class SessionState(msgspec.Struct, frozen=True, kw_only=True):
    """Frontdoor's answer about one Session Token.

    Attributes:
        active: Whether the token is live: issued, unexpired, its Session not ended.
        iss: The issuer, when active.
        client_id: The agent's ``client_id``, when active.
        sub: The User ID, when active.
        sid: The Session ID, when active.
        signed_in: Whether the Session is signed in now.
        account: The company's account ID when signed in.
        scope: Space-separated scopes granted, when signed in.
        cnf: The DPoP key binding, for a DPoP token.
        resource: The MCP server a resource-bound token is for.
        exp: Expiry, seconds since the epoch.
        iat: Issued at, seconds since the epoch.
        token_type: ``DPoP`` or ``Bearer``.
    """

    active: bool
    iss: str | None = None
    client_id: str | None = None
    sub: str | None = None
    sid: str | None = None
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None
    cnf: _Confirmation | None = None
    resource: str | None = None
    exp: int | None = None
    iat: int | None = None
    token_type: Literal["DPoP", "Bearer"] | None = None


class Introspector:
    """Asks Frontdoor about Session Tokens.

    Args:
        url: ``{issuer}/oauth/introspect``.
        credential: The resource-server credential (``fdrs_...``) from the console.
        http: The client to ask with: an ``httpx.AsyncClient``, or the verifier's lean one.
        timeout: Seconds one answer may take.
    """

    def __init__(self, url: str, credential: str, http: FrontdoorHTTP, *, timeout: float = 5.0) -> None:
        self._url = url
        self._authorization = f"Bearer {credential}"
        self._http = http
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"Introspector({self._url!r})"  # Never the credential.

    async def introspect(self, token: str) -> SessionState:
        """The state of the Session ``token`` belongs to.

        Args:
            token: The Session Token exactly as the agent sent it.

        Returns:
            Frontdoor's answer; ``active`` is ``False`` for a token it does not honour.

        Raises:
            IntrospectionUnavailable: No usable answer; fail closed.
            IntrospectionRefused: The credential was refused.
        """
        response = await post(
            self._http,
            self._url,
            data={"token": token, "token_type_hint": "access_token"},
            authorization=self._authorization,
            seconds=self._timeout,
            endpoint="introspection",
            unavailable=IntrospectionUnavailable,
            max_bytes=_MAX_BYTES,
        )
        return decode_answer(
            response,
            SessionState,
            endpoint="introspection",
            nothing="no state",
            max_bytes=_MAX_BYTES,
            unavailable=IntrospectionUnavailable,
            refused=IntrospectionRefused,
        )
