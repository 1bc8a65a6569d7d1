"""Your own account pages (PAP §4.9 from your side): the agents connected to an account,
and disconnecting them.

A "connected agents" page on your website lists the agents your customer let sign in to
their account and lets them disconnect one. :class:`FrontdoorAccounts` asks Frontdoor,
server to server with your resource-server credential:

- :meth:`FrontdoorAccounts.connected_agents`: ``GET {issuer}/accounts/{account}/agents``,
  the agents with a live sign-in to the account, most recently signed in first;
- :meth:`FrontdoorAccounts.disconnect`: ``POST {issuer}/accounts/disconnect``, revokes
  every sign-in of the account (only that agent's with ``client_id``): its Account Tokens
  stop refreshing and its Sessions are signed out at once.

``account`` is *your* account ID, the one you gave Frontdoor at sign-in. You know your
customer from your own sign-in, never from Frontdoor: check that first, and only ever pass
the signed-in customer's own account. ``client_name`` is the agent's own words: escape it.

Example::

    accounts = FrontdoorAccounts(ISSUER, credential)   # once, at start-up; aclose() at shutdown

    agents = await accounts.connected_agents("acct_ada")
    done = await accounts.disconnect("acct_ada", client_id=agents[0].client_id)

Every failure is a :class:`FrontdoorAccountsError`: :class:`AccountsUnavailable` (no usable
answer: show "try again", change nothing), :class:`AccountsCredentialRefused` (your
credential is wrong or revoked) or :class:`AccountsRequestRefused` (Frontdoor refused the
request itself). The credential is never logged nor in any message.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final, TypeVar
from urllib.parse import quote

import httpx
import msgspec

__all__ = [
    "AccountsCredentialRefused",
    "AccountsRequestRefused",
    "AccountsUnavailable",
    "ConnectedAgent",
    "DisconnectResult",
    "FrontdoorAccounts",
    "FrontdoorAccountsError",
]

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_ACCOUNT: Final = 255
_MAX_CLIENT_ID: Final = 2048
_MAX_ANSWER: Final = 1024 * 1024
_T = TypeVar("_T")


class FrontdoorAccountsError(Exception):
    """Frontdoor could not list or disconnect; nothing is known to have changed."""


class AccountsUnavailable(FrontdoorAccountsError):
    """No usable answer from Frontdoor (unreachable, timed out, 5xx, malformed): try again later."""


class AccountsCredentialRefused(FrontdoorAccountsError):
    """Frontdoor refused the resource-server credential (HTTP 401/403): a configuration error."""


class AccountsRequestRefused(FrontdoorAccountsError):
    """Frontdoor refused the request itself (HTTP 4xx).

    Attributes:
        status: The HTTP status.
        error: The refusal's code, e.g. ``invalid_request`` (the problem's ``code``; RFC 9457).
    """

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"Frontdoor refused the request: HTTP {status} {error}")
        self.status = status
        self.error = error


class ConnectedAgent(msgspec.Struct, frozen=True, kw_only=True):
    """One agent with at least one live sign-in to the account.

    Attributes:
        client_id: The agent (its metadata URL).
        client_name: Its display name, in the agent's own words (escape it); ``None`` if unknown.
        logo_uri: Its logo URL, if its metadata names one.
        scope: Every scope the user granted it, space-separated.
        connected_at: When its oldest live sign-in happened.
        last_signed_in_at: When its newest live sign-in happened.
        last_refreshed_at: When it last got an Account Token.
        sign_ins: How many live sign-ins it has.
        simulator: True for Frontdoor's agent simulator (a test sign-in from the dashboard).
    """

    client_id: str
    client_name: str | None = None
    logo_uri: str | None = None
    scope: str = ""
    connected_at: datetime
    last_signed_in_at: datetime
    last_refreshed_at: datetime
    sign_ins: int = 1
    simulator: bool = False

    @property
    def scopes(self) -> list[str]:
        """``scope`` as a list."""
        return self.scope.split()


class DisconnectResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a disconnect changed (all zero if nothing was connected: disconnecting is idempotent).

    Attributes:
        account: The account.
        client_id: The agent disconnected, or ``None`` for every agent.
        sign_ins_revoked: Live sign-ins revoked.
        tokens_revoked: Account Tokens revoked.
        sessions_signed_out: Sessions signed out.
    """

    account: str
    client_id: str | None = None
    sign_ins_revoked: int = 0
    tokens_revoked: int = 0
    sessions_signed_out: int = 0


class _Agents(msgspec.Struct):
    agents: list[ConnectedAgent]


class _Refusal(msgspec.Struct):
    """A problem (``code``, RFC 9457), or the earlier ``{"error"}`` shape."""

    code: str | None = None
    error: str | None = None


def _check(name: str, value: str, limit: int) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= limit or value.strip() != value or "\x00" in value:
        raise ValueError(f"{name} must be 1 to {limit} characters, without surrounding spaces")


class FrontdoorAccounts:
    """Lists and disconnects the agents connected to your customers' accounts.

    Create one at start-up and share it; close it with :meth:`aclose` (or ``async with``).

    Args:
        issuer: Your Frontdoor issuer, ``auth.issuer`` in ``poppy.json``.
        credential: Your resource-server credential (``fdrs_...``).
        http: The client to reach Frontdoor with; one is created (and closed by
            :meth:`aclose`) if omitted.
        timeout: Seconds one call to Frontdoor may take.
    """

    def __init__(self, issuer: str, credential: str, *, http: httpx.AsyncClient | None = None,
                 timeout: float = 5) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        if not issuer or issuer.endswith("/"):
            raise ValueError("issuer must be your Frontdoor issuer URL, without a trailing slash")
        self._issuer = issuer
        self._authorization = f"Bearer {credential}"
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"FrontdoorAccounts({self._issuer!r})"  # Never the credential.

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> FrontdoorAccounts:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def connected_agents(self, account: str) -> list[ConnectedAgent]:
        """The agents connected to ``account``, most recently signed in first.

        Args:
            account: Your account ID (the signed-in customer's own).

        Returns:
            The agents with a live sign-in to the account; empty if none.

        Raises:
            ValueError: ``account`` is empty, too long or padded.
            FrontdoorAccountsError: see the module; nothing was read.
        """
        _check("account", account, _MAX_ACCOUNT)
        url = f"{self._issuer}/accounts/{quote(account, safe='')}/agents"
        response = await self._ask("GET", url, None)
        return self._decode(response, _Agents).agents

    async def disconnect(self, account: str, client_id: str | None = None) -> DisconnectResult:
        """Disconnect one agent (``client_id``) or every agent from ``account``.

        Revokes the sign-ins at once: the agent's Account Tokens no longer refresh and its
        Sessions are signed out, so its next call to your API needs a new sign-in.

        Args:
            account: Your account ID (the signed-in customer's own).
            client_id: The agent to disconnect; ``None`` disconnects every agent.

        Returns:
            What changed; all zero if nothing was connected.

        Raises:
            ValueError: ``account`` or ``client_id`` is malformed.
            FrontdoorAccountsError: see the module; assume nothing changed, offer a retry.
        """
        _check("account", account, _MAX_ACCOUNT)
        body: dict[str, str] = {"account": account}
        if client_id is not None:
            _check("client_id", client_id, _MAX_CLIENT_ID)
            body["client_id"] = client_id
        response = await self._ask("POST", f"{self._issuer}/accounts/disconnect", body)
        return self._decode(response, DisconnectResult)

    async def _ask(self, method: str, url: str, body: dict[str, str] | None) -> httpx.Response:
        headers = {"Authorization": self._authorization, "Accept": "application/json"}
        try:
            response = await self._http.request(method, url, headers=headers, json=body, timeout=self._timeout,
                                                follow_redirects=False)
        except httpx.HTTPError as failure:
            _LOG.warning("frontdoor_sdk: the accounts API could not be reached: %s", type(failure).__name__)
            raise AccountsUnavailable("Frontdoor could not be reached") from None
        status = response.status_code
        if status in (401, 403):
            _LOG.error("frontdoor_sdk: Frontdoor refused the resource-server credential (HTTP %s)", status)
            raise AccountsCredentialRefused("Frontdoor refused the resource-server credential")
        if 400 <= status < 500 and status not in (408, 429):
            try:
                refusal = msgspec.json.decode(response.content[:_MAX_ANSWER], type=_Refusal)
                error = (refusal.code or refusal.error or "refused")[:64]
            except (msgspec.DecodeError, msgspec.ValidationError):
                error = "refused"
            _LOG.warning("frontdoor_sdk: the accounts API refused the request (HTTP %s %s)", status, error)
            raise AccountsRequestRefused(status, error)
        if status != 200 or len(response.content) > _MAX_ANSWER:
            _LOG.warning("frontdoor_sdk: the accounts API answered HTTP %s", status)
            raise AccountsUnavailable(f"Frontdoor answered HTTP {status}")
        return response

    @staticmethod
    def _decode(response: httpx.Response, kind: type[_T]) -> _T:
        try:
            return msgspec.json.decode(response.content, type=kind)
        except (msgspec.DecodeError, msgspec.ValidationError):
            _LOG.warning("frontdoor_sdk: the accounts API answered a malformed document")
            raise AccountsUnavailable("Frontdoor answered a malformed document") from None
