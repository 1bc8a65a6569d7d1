"""Your side of Frontdoor's operations ledger: propose, revise, report, read, confirm on your site.

Anything with consequences that your API, MCP tool or conversation would do for an agent
becomes an **operation** (PAP Operations extension v1). You propose it here; the agent's
user approves one revision; Frontdoor calls your perform webhook (see
:mod:`frontdoor_sdk.webhooks`) once per confirmation. Never perform on the agent's request
itself. See ``docs/operations.md`` for the ledger API this client calls.

Example::

    ledger = FrontdoorLedger("https://ledger.frontdoor.example/acme", credential)  # once; aclose() at shutdown

    try:
        proposed = await ledger.propose(
            caller, kind="order.place", summary="Order 2 x Chai for 36.00 EUR",
            terms={"total": {"amount": "36.00", "currency": "EUR"}},
            action_key="order:chai-2", url="https://shop.example/operations/{operation_id}",
        )
    except LedgerError as refused:
        return refused.refusal()               # 403 extension_required, 503, ...: send as is
    return 202, operation_accepted(proposed)   # {"operation": {...}}

Errors are typed, all :class:`LedgerError`, each with :meth:`LedgerError.refusal`, the
answer to give the agent:

- :class:`LedgerRefused`: Frontdoor refused the request (``code``, ``status``,
  ``description``). ``extension_required`` becomes the agent's ``403 extension_required``
  (nothing was proposed, OPS-2-01); ``session_inactive`` its ``401 invalid_token``.
- :class:`LedgerUnavailable`: no usable answer (unreachable, timed out, 5xx, 429, malformed):
  the agent gets ``503 temporarily_unavailable`` with ``Retry-After``. Like the verifier,
  this fails closed: nothing is assumed proposed, revised or confirmed.
- :class:`LedgerCredentialRefused`: your credential was refused (HTTP 401): ``500
  server_error``, logged at ``ERROR``; fix your configuration.

The credential is never logged, nor put in an error message or the ``repr``.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal, TypeVar
from urllib.parse import quote, urlsplit

import httpx
import msgspec
from frontdoor_protocol import ErrorCode, ProtocolError

from frontdoor_sdk.caller import Caller
from frontdoor_sdk.refusal import Refusal, refusal

__all__ = [
    "OPERATIONS_EXTENSION",
    "FrontdoorLedger",
    "LedgerCredentialRefused",
    "LedgerError",
    "LedgerRecord",
    "LedgerRefused",
    "LedgerUnavailable",
    "OperationDetails",
    "OperationList",
    "ProposeResult",
    "operation_accepted",
]

OPERATIONS_EXTENSION: Final = "operations"
"""The extension an agent must list to be given operations (PAP §3.3, OPS-2-01)."""

_LOG: Final = logging.getLogger("frontdoor_sdk")
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_MAX_ANSWER: Final = 1024 * 1024
_MAX_ID: Final = 255
_DEFAULT_RETRY_AFTER: Final = 2
_MAX_RETRY_AFTER: Final = 300
Outcome = Literal["succeeded", "failed"]
_T = TypeVar("_T")


# --- errors -----------------------------------------------------------------------------


class LedgerError(Exception):
    """The ledger call did not do what was asked; :meth:`refusal` is the agent's answer."""

    def refusal(self, *, resource_url: str | None = None, mcp_dpop: bool = True) -> Refusal:
        """The answer to give the agent whose request led to this call.

        Args:
            resource_url: Your MCP server's ``url`` when answering there (shapes challenges).
            mcp_dpop: Whether that MCP server takes DPoP tokens.
        """
        error = ProtocolError(ErrorCode.SERVER_ERROR, "the company could not record this operation")
        return refusal(error, resource_url=resource_url, mcp_dpop=mcp_dpop)


class LedgerUnavailable(LedgerError):
    """No usable answer from Frontdoor: try again later. Nothing is known to have changed.

    Attributes:
        retry_after: Seconds to suggest in ``Retry-After`` (Frontdoor's, capped, or 2).
    """

    def __init__(self, message: str, retry_after: int = _DEFAULT_RETRY_AFTER) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def refusal(self, *, resource_url: str | None = None, mcp_dpop: bool = True) -> Refusal:
        """``503 temporarily_unavailable`` with ``Retry-After`` (fail closed)."""
        error = ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, "operations are unavailable, try again shortly")
        return refusal(error, resource_url=resource_url, mcp_dpop=mcp_dpop, retry_after=str(self.retry_after))


class LedgerCredentialRefused(LedgerError):
    """Frontdoor refused your resource-server credential (HTTP 401): a configuration error."""


class LedgerRefused(LedgerError):
    """Frontdoor refused the request itself (HTTP 4xx), e.g. ``extension_required``.

    Attributes:
        code: The problem's ``code``: ``extension_required``, ``invalid_request``,
            ``unknown_kind``, ``session_inactive``, ``operation_not_found``,
            ``not_proposed``, ``terms_changed``, ``outcome_conflict``, ...
        status: The HTTP status Frontdoor answered.
        description: The problem's ``detail``, if any.
        body: The whole problem document (``application/problem+json``; ``terms_changed``
            carries the current ``operation``, ``insufficient_scope`` the ``scope``).
    """

    def __init__(self, code: str, status: int, description: str | None = None,
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"Frontdoor refused the request: HTTP {status} {code}")
        self.code = code
        self.status = status
        self.description = description
        self.body: dict[str, Any] = dict(body or {})

    @property
    def operation(self) -> dict[str, Any] | None:
        """The current operation a refusal carries (``terms_changed``), if any."""
        operation = self.body.get("operation")
        if isinstance(operation, dict):
            return operation
        return self.body if "operation_id" in self.body else None

    def refusal(self, *, resource_url: str | None = None, mcp_dpop: bool = True) -> Refusal:
        """The agent's answer: what the agent can act on, else ``500 server_error``.

        - ``extension_required`` → ``403 extension_required`` naming the extension (the
          agent does not list ``operations``; nothing was proposed, OPS-2-01);
        - ``session_inactive`` → ``401 invalid_token`` (the Session ended meanwhile);
        - ``sign_in_required`` / ``insufficient_scope`` → themselves, with ``scope``;
        - anything else (``invalid_request``, ``unknown_kind``...) is your request's
          problem, not the agent's: ``500 server_error``.
        """
        error = self._agent_error()
        if error is None:
            return super().refusal(resource_url=resource_url, mcp_dpop=mcp_dpop)
        return refusal(error, resource_url=resource_url, mcp_dpop=mcp_dpop)

    def _agent_error(self) -> ProtocolError | None:
        if self.code == ErrorCode.EXTENSION_REQUIRED:
            extension = self.body.get("extension")
            if not isinstance(extension, str):
                extension = OPERATIONS_EXTENSION
            try:
                return ProtocolError(ErrorCode.EXTENSION_REQUIRED, "this request needs the operations extension",
                                     extension=extension)
            except ValueError:
                return ProtocolError(ErrorCode.EXTENSION_REQUIRED, "this request needs the operations extension",
                                     extension=OPERATIONS_EXTENSION)
        if self.code == "session_inactive":
            return ProtocolError(ErrorCode.INVALID_TOKEN, "the Session is no longer active")
        if self.code in (ErrorCode.SIGN_IN_REQUIRED, ErrorCode.INSUFFICIENT_SCOPE):
            scope = self.body.get("scope")
            try:
                return ProtocolError(ErrorCode(self.code), "this request needs a signed-in Session with more scopes",
                                     scope=scope if isinstance(scope, str) and scope else None)
            except ValueError:
                return ProtocolError(ErrorCode(self.code), "this request needs a signed-in Session with more scopes")
        return None


# --- results ----------------------------------------------------------------------------


class ProposeResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`FrontdoorLedger.propose` did.

    Attributes:
        operation: The operation object, as agents see it: give it to the agent as
            ``202 {"operation": ...}`` (:func:`operation_accepted`).
        created: ``True`` for a new operation (``201``), ``False`` when an open operation
            with the same ``action_key`` was returned (``200``, OPS-4-01).
    """

    operation: dict[str, Any]
    created: bool


class OperationDetails(msgspec.Struct, frozen=True, kw_only=True):
    """What Frontdoor knows about an operation beyond what the agent sees.

    Attributes:
        kind: The operation kind, e.g. ``order.place``.
        client_id: The agent that proposed it.
        user_id: The agent's User ID for the user.
        account: Your account ID when the proposing Session was signed in, else ``None``:
            only that account can read or confirm it.
        session_id: The proposing Session.
        action_key: The ``action_key`` it was proposed with, if any.
        input: Your opaque ``input``, as proposed.
        created_at: When it was proposed.
        updated_at: When it last changed.
        needs_attention: Whether Frontdoor flagged it for your admins (e.g. retries exhausted).
    """

    kind: str | None = None
    client_id: str | None = None
    user_id: str | None = None
    account: str | None = None
    session_id: str | None = None
    action_key: str | None = None
    input: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    needs_attention: bool = False


class LedgerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One operation as the ledger API reads it: the agent's view plus your details."""

    operation: dict[str, Any]
    details: OperationDetails = msgspec.field(default_factory=OperationDetails)


class OperationList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of :meth:`FrontdoorLedger.list`, newest first; ``next_cursor`` reads on."""

    items: builtins.list[LedgerRecord]
    next_cursor: str | None = None


class _Answer(msgspec.Struct):
    operation: dict[str, Any]


class _Record(msgspec.Struct):
    operation: dict[str, Any]
    details: OperationDetails = msgspec.field(default_factory=OperationDetails)


class _Page(msgspec.Struct):
    items: builtins.list[dict[str, Any]]
    next_cursor: str | None = None


def operation_accepted(operation: Mapping[str, Any] | ProposeResult) -> dict[str, Any]:
    """The ``202`` body your API answers a proposal with: ``{"operation": {...}}`` (Operations §4.1)."""
    value = operation.operation if isinstance(operation, ProposeResult) else dict(operation)
    return {"operation": value}


# --- the client -------------------------------------------------------------------------


def _caller_body(caller: Caller) -> dict[str, str]:
    """The proposing caller as the ledger API takes it.

    Under PAP 1.0 the Session is named by Frontdoor's ``ses_`` ID when the verifier learned
    it, and the signed-in account comes from the request's access token (ADR 0004 §9), so a
    signed-in proposal is bound to that account rather than to whoever confirms it.
    """
    body = {
        "session_id": caller.frontdoor_session_id or caller.session_id,
        "client_id": caller.client_id,
        "user_id": caller.user_id,
    }
    if caller.profile == "1.0" and caller.signed_in and caller.account:
        body["account"] = caller.account
    return body


def _check_ledger_url(ledger_url: str) -> str:
    parts = urlsplit(ledger_url)
    secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    if not secure or not parts.hostname or parts.query or parts.fragment or ledger_url.endswith("/"):
        raise ValueError("ledger_url must be your ledger base URL with your slug, "
                         "e.g. https://ledger.frontdoor.example/acme (https, no trailing slash)")
    return ledger_url


def _check_id(operation_id: str) -> str:
    if not isinstance(operation_id, str) or not 0 < len(operation_id) <= _MAX_ID or operation_id.strip() != operation_id:
        raise ValueError(f"operation_id must be 1 to {_MAX_ID} characters, without surrounding spaces")
    return quote(operation_id, safe="")


def _retry_after(response: httpx.Response) -> int:
    value = response.headers.get("retry-after", "")
    if value.isascii() and value.isdigit() and len(value) <= 9:  # "²".isdigit() is true, int("²") fails
        return max(1, min(int(value), _MAX_RETRY_AFTER))
    return _DEFAULT_RETRY_AFTER


class FrontdoorLedger:
    """Calls your tenant's ledger API (``{ledger_url}/v1/operations``) with your credential.

    Create one at start-up and share it; close it with :meth:`aclose` (or ``async with``).

    Args:
        ledger_url: Frontdoor's ledger base URL **with your slug**, e.g.
            ``https://ledger.frontdoor.example/acme`` (``make run``: ``http://127.0.0.1:8002/demo``).
        credential: Your resource-server credential (``fdrs_...``), the one the verifier uses.
        http: The client to reach Frontdoor with (a ``MockTransport`` in tests); one is
            created, and closed by :meth:`aclose`, if omitted.
        timeout: Seconds one call may take.
    """

    def __init__(self, ledger_url: str, credential: str, *, http: httpx.AsyncClient | None = None,
                 timeout: float = 5.0) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        self._base = f"{_check_ledger_url(ledger_url)}/v1/operations"
        self._ledger_url = ledger_url
        self._authorization = f"Bearer {credential}"
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"FrontdoorLedger({self._ledger_url!r})"  # Never the credential.

    @property
    def ledger_url(self) -> str:
        """The ledger base URL with your slug."""
        return self._ledger_url

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> FrontdoorLedger:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # --- calls ----------------------------------------------------------------------------

    async def propose(
        self,
        caller: Caller,
        *,
        kind: str,
        summary: str,
        terms: Mapping[str, Any] | None = None,
        user_approval_required: bool = True,
        expires_in: int | None = None,
        action_key: str | None = None,
        input: Any = None,
        url: str | None = None,
    ) -> ProposeResult:
        """Propose an operation for the verified ``caller`` (``POST /v1/operations``).

        Args:
            caller: The verified caller of the request that asks for the action.
            kind: The operation kind configured in the management API, e.g. ``order.place``.
            summary: Everything that affects the action, in words (OPS-3-01).
            terms: The same values, machine-readably (amounts as decimal strings).
            user_approval_required: ``True`` (the default) when only the user's own approval
                may confirm it; ``False`` lets a standing permission cover it.
            expires_in: Seconds until the proposal expires; the kind's default if omitted.
            action_key: Your key for the action: while an operation with it is open for the
                same agent, user and account, proposing again returns that one (OPS-4-01).
                Use the same key in your API, MCP tool and conversation.
            input: Opaque to Frontdoor; it comes back in the perform webhook.
            url: Your page for the operation; ``{operation_id}`` is replaced.

        Returns:
            The operation, and whether it is new.

        Raises:
            LedgerError: See the module; ``LedgerRefused("extension_required")`` when the
                agent does not list the operations extension (nothing was proposed).
        """
        body: dict[str, Any] = {
            "kind": kind,
            "caller": _caller_body(caller),
            "summary": summary,
            "user_approval_required": user_approval_required,
        }
        optional = {"terms": terms, "expires_in": expires_in, "action_key": action_key, "input": input, "url": url}
        body.update({name: value for name, value in optional.items() if value is not None})
        response = await self._ask("POST", self._base, body, ok=(200, 201))
        answer = self._decode(response, _Answer)
        return ProposeResult(operation=answer.operation, created=response.status_code == 201)

    async def revise(
        self,
        operation_id: str,
        *,
        summary: str,
        terms: Mapping[str, Any] | None = None,
        user_approval_required: bool | None = None,
        expires_in: int | None = None,
    ) -> dict[str, Any]:
        """A new revision of a proposed operation (``POST /v1/operations/{id}/revisions``).

        Earlier revisions stay as they were; an agent confirming one gets ``terms_changed``.

        Returns:
            The operation, ``revision`` + 1.

        Raises:
            LedgerError: ``LedgerRefused("not_proposed")`` once it left ``proposed``.
        """
        body: dict[str, Any] = {"summary": summary}
        optional = {"terms": terms, "user_approval_required": user_approval_required, "expires_in": expires_in}
        body.update({name: value for name, value in optional.items() if value is not None})
        response = await self._ask("POST", f"{self._base}/{_check_id(operation_id)}/revisions", body)
        return self._decode(response, _Answer).operation

    async def report_outcome(
        self, operation_id: str, outcome: Outcome, summary: str, data: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Report the outcome of a perform you answered ``202`` (``POST /v1/operations/{id}/outcome``).

        Args:
            operation_id: The operation.
            outcome: ``succeeded`` or ``failed`` (only when you know what happened).
            summary: Every change made, partial ones included (OPS-6-05).
            data: Machine-readable result, e.g. ``{"order_id": ...}``.

        Returns:
            The operation in its final state. Reporting the same outcome again is accepted.

        Raises:
            LedgerError: ``LedgerRefused("outcome_conflict")`` for a different outcome.
        """
        if outcome not in ("succeeded", "failed"):
            raise ValueError("outcome must be 'succeeded' or 'failed'")
        result: dict[str, Any] = {"summary": summary}
        if data is not None:
            result["data"] = dict(data)
        response = await self._ask("POST", f"{self._base}/{_check_id(operation_id)}/outcome",
                                   {"outcome": outcome, "result": result})
        return self._decode(response, _Answer).operation

    async def get(self, operation_id: str) -> LedgerRecord:
        """One operation and its details (``GET /v1/operations/{id}``).

        Raises:
            LedgerError: ``LedgerRefused("operation_not_found", 404)`` for an unknown ID.
        """
        response = await self._ask("GET", f"{self._base}/{_check_id(operation_id)}", None)
        record = self._decode(response, _Record)
        return LedgerRecord(operation=record.operation, details=record.details)

    async def list(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        account: str | None = None,
        client_id: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> OperationList:
        """Operations, newest first (``GET /v1/operations``); pass ``next_cursor`` on as ``cursor``.

        Args:
            state: Only this state (``proposed``, ``in_progress``, ``succeeded``...).
            kind: Only this kind.
            account: Only this account's.
            client_id: Only this agent's.
            since: Proposed at or after (an aware ``datetime`` or an RFC 3339 string).
            until: Proposed before.
            limit: At most this many (1 to 200).
            cursor: Where the previous page ended.
        """
        if limit is not None and not 1 <= limit <= 200:
            raise ValueError("limit must be 1 to 200")
        filters = {"state": state, "kind": kind, "account": account, "client_id": client_id,
                   "since": since, "until": until, "limit": limit, "cursor": cursor}
        params = {name: value.isoformat() if isinstance(value, datetime) else str(value)
                  for name, value in filters.items() if value is not None}
        response = await self._ask("GET", self._base, None, params=params)
        page = self._decode(response, _Page)
        items: builtins.list[LedgerRecord] = []
        for item in page.items:
            # Each item is {"operation", "details"}; a bare operation object is taken too.
            if isinstance(item.get("operation"), dict):
                record = self._convert(item, _Record)
                items.append(LedgerRecord(operation=record.operation, details=record.details))
            else:
                items.append(LedgerRecord(operation=item))
        return OperationList(items=items, next_cursor=page.next_cursor)

    async def confirm_on_website(self, operation_id: str, revision: int, session_id: str) -> dict[str, Any]:
        """The user confirmed ``revision`` on your operation page (``POST /v1/operations/{id}/confirm``).

        Call it only from a page shown in the agent's browser joined to ``session_id``
        (:class:`frontdoor_sdk.BrowserJoin`), the operation's owner's Session. It goes
        through the same compare-and-set as the agent's confirm: at most one confirmation
        wins, whatever the channel (OPS-6-02).

        Returns:
            The operation as it is now (``in_progress``, or final if the perform answered).

        Raises:
            LedgerError: ``LedgerRefused("terms_changed", 409)`` with the current
                ``operation`` when ``revision`` is not the current one.
        """
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
            raise ValueError("revision must be a positive integer")
        response = await self._ask("POST", f"{self._base}/{_check_id(operation_id)}/confirm",
                                   {"revision": revision, "session_id": session_id}, ok=(200, 202))
        # {"operation": ...}; an operation still in progress may come bare, as agents get it.
        answer = self._decode(response, dict[str, Any])
        operation = answer.get("operation", answer)
        if not isinstance(operation, dict) or "operation_id" not in operation:
            _LOG.warning("frontdoor_sdk: the ledger answered a malformed document")
            raise LedgerUnavailable("Frontdoor's ledger answered a malformed document")
        return operation

    # --- plumbing -------------------------------------------------------------------------

    async def _ask(self, method: str, url: str, body: Mapping[str, Any] | None, *,
                   ok: tuple[int, ...] = (200,), params: Mapping[str, str] | None = None) -> httpx.Response:
        headers = {"Authorization": self._authorization, "Accept": "application/json"}
        content = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            content = msgspec.json.encode(body)
        try:
            response = await self._http.request(method, url, headers=headers, content=content, params=params,
                                                timeout=self._timeout, follow_redirects=False)
        except httpx.HTTPError as failure:
            _LOG.warning("frontdoor_sdk: the ledger could not be reached: %s", type(failure).__name__)
            raise LedgerUnavailable("Frontdoor's ledger could not be reached") from None
        status = response.status_code
        if status in ok and len(response.content) <= _MAX_ANSWER:
            return response
        if status == 401:
            _LOG.error("frontdoor_sdk: Frontdoor's ledger refused the resource-server credential (HTTP 401)")
            raise LedgerCredentialRefused("Frontdoor refused the resource-server credential")
        if 400 <= status < 500 and status not in (408, 429):
            refused = self._refused(response)
            _LOG.info("frontdoor_sdk: the ledger refused %s: HTTP %s %s", method, status, refused.code)
            raise refused
        _LOG.warning("frontdoor_sdk: the ledger answered HTTP %s", status)
        raise LedgerUnavailable(f"Frontdoor's ledger answered HTTP {status}", _retry_after(response))

    @staticmethod
    def _refused(response: httpx.Response) -> LedgerRefused:
        try:
            body = msgspec.json.decode(response.content[:_MAX_ANSWER])
        except msgspec.DecodeError:
            body = None
        if not isinstance(body, dict):
            return LedgerRefused("refused", response.status_code)
        # RFC 9457 problem details (``code``, ``detail``); the earlier ``error`` shape still read.
        error = body.get("code", body.get("error"))
        description = body.get("detail", body.get("error_description"))
        return LedgerRefused(
            error[:64] if isinstance(error, str) and error else "refused",
            response.status_code,
            description[:200] if isinstance(description, str) else None,
            body,
        )

    @staticmethod
    def _decode(response: httpx.Response, kind: type[_T]) -> _T:
        try:
            return msgspec.json.decode(response.content, type=kind)
        except (msgspec.DecodeError, msgspec.ValidationError):
            _LOG.warning("frontdoor_sdk: the ledger answered a malformed document")
            raise LedgerUnavailable("Frontdoor's ledger answered a malformed document") from None

    @staticmethod
    def _convert(value: Any, kind: type[_T]) -> _T:
        try:
            return msgspec.convert(value, type=kind)
        except msgspec.ValidationError:
            _LOG.warning("frontdoor_sdk: the ledger answered a malformed document")
            raise LedgerUnavailable("Frontdoor's ledger answered a malformed document") from None
