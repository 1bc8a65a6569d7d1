"""The Session's current state, from Frontdoor's introspection endpoint.

``POST {issuer}/oauth/introspect`` with the company's resource-server credential
(``Authorization: Bearer fdrs_...``) and ``token=<Session Token>`` (RFC 7662 §2.1, plus
PAP fields: ``sid``, ``signed_in``, ``account``). Asked on every request by default, so a
sign-out takes effect on the very next one (PAP-4.9-01). It fails closed: anything but a
well-formed answer is :class:`IntrospectionUnavailable`, never "allow".
"""

from __future__ import annotations

import logging
from typing import Final, Literal

import httpx
import msgspec

__all__ = ["IntrospectionRefused", "IntrospectionUnavailable", "Introspector", "SessionState"]

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_BYTES: Final = 64 * 1024


class IntrospectionUnavailable(Exception):
    """Frontdoor did not answer usably (network, 429, 5xx, malformed): answer 503.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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


def retry_after_of(response: httpx.Response) -> str | None:
    """Frontdoor's ``Retry-After`` when it is whole seconds (at most six digits), else ``None``."""
    value = response.headers.get("retry-after", "")
    return value if value.isascii() and value.isdigit() and len(value) <= 6 else None


class Introspector:
    """Asks Frontdoor about Session Tokens.

    Args:
        url: ``{issuer}/oauth/introspect``.
        credential: The resource-server credential (``fdrs_...``) from the console.
        http: The client to ask with.
        timeout: Seconds one answer may take.
    """

    def __init__(self, url: str, credential: str, http: httpx.AsyncClient, *, timeout: float = 5.0) -> None:
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
        try:
            response = await self._http.post(
                self._url,
                data={"token": token, "token_type_hint": "access_token"},
                headers={"Authorization": self._authorization, "Accept": "application/json"},
                timeout=self._timeout,
                follow_redirects=False,
            )
        except httpx.HTTPError as failure:
            _LOG.warning("frontdoor_sdk: introspection failed: %s", type(failure).__name__)
            raise IntrospectionUnavailable("introspection could not be reached") from None
        if response.status_code in (401, 403):
            _LOG.error(
                "frontdoor_sdk: Frontdoor refused the resource-server credential (HTTP %s)", response.status_code
            )
            raise IntrospectionRefused("the resource-server credential was refused")
        if response.status_code != 200 or len(response.content) > _MAX_BYTES:
            _LOG.warning("frontdoor_sdk: introspection answered HTTP %s", response.status_code)
            raise IntrospectionUnavailable("introspection answered no state", retry_after_of(response))
        try:
            return msgspec.json.decode(response.content, type=SessionState)
        except (msgspec.DecodeError, msgspec.ValidationError):
            _LOG.warning("frontdoor_sdk: introspection answered a malformed document")
            raise IntrospectionUnavailable("introspection answered a malformed document") from None
