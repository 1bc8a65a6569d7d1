"""The closed catalogue of OAuth and PAP error codes a company answers with.

Every refusal on a protocol surface is one :class:`ErrorCode`; the catalogue fixes its HTTP
status and whether it also goes in a ``WWW-Authenticate`` challenge. A :class:`ProtocolError`
is that entry plus optional detail; adding detail returns a copy, as fosite's ``WithHint``
does, so a shared instance can never be changed by one request for another.

Two surfaces answer some codes differently (RFC 9449 §5, §7.1, §8, §9):

- ``Surface.OAUTH``: the token, revocation, device authorization and other OAuth/PAP JSON
  endpoints. DPoP problems there are ``400`` with no challenge.
- ``Surface.RESOURCE``: anything that takes a Session Token (APIs, MCP servers, the
  operations and feedback endpoints). Token problems there are ``401``/``403`` with a
  challenge of the scheme the token was sent with (``DPoP``, or ``Bearer`` for an MCP
  server without DPoP support, PAP-4.3-10).

Error bodies are ``{"error", "error_description"?}`` (RFC 6749 §5.2), plus ``scope`` for
``insufficient_scope`` and ``extension`` for ``extension_required`` (PAP §3.3). Nothing in a
body or challenge is ever taken from the request, so no credential can be echoed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, NoReturn

import msgspec

from frontdoor_protocol.extension_name import ExtensionNameKind, extension_name_kind
from frontdoor_protocol.scopes import is_scope_token

__all__ = [
    "CATALOGUE",
    "ChallengeScheme",
    "ErrorCode",
    "ErrorEntry",
    "ProtocolError",
    "Surface",
]

_MAX_DESCRIPTION: Final = 200
# error_description = 1*( %x20-21 / %x23-5B / %x5D-7E ) (RFC 6749 §5.2, RFC 6750 §3).
_DESCRIPTION: Final = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")


class ErrorCode(StrEnum):
    """Every ``error`` value a Frontdoor company may send."""

    # RFC 6749 §5.2: token endpoint.
    INVALID_REQUEST = "invalid_request"
    INVALID_CLIENT = "invalid_client"
    INVALID_GRANT = "invalid_grant"
    UNAUTHORIZED_CLIENT = "unauthorized_client"
    UNSUPPORTED_GRANT_TYPE = "unsupported_grant_type"
    INVALID_SCOPE = "invalid_scope"
    # RFC 6749 §4.1.2.1: authorization endpoint (sent on the redirect).
    UNSUPPORTED_RESPONSE_TYPE = "unsupported_response_type"
    ACCESS_DENIED = "access_denied"
    SERVER_ERROR = "server_error"
    TEMPORARILY_UNAVAILABLE = "temporarily_unavailable"
    # RFC 8628 §3.5: device access token polling.
    AUTHORIZATION_PENDING = "authorization_pending"
    SLOW_DOWN = "slow_down"
    EXPIRED_TOKEN = "expired_token"
    # RFC 8707 §2: a resource (MCP server url) the company does not serve.
    INVALID_TARGET = "invalid_target"
    # RFC 7009 §2.2.1: revocation of a token type the company does not revoke.
    UNSUPPORTED_TOKEN_TYPE = "unsupported_token_type"
    # RFC 6750 §3.1 and RFC 9449 §7.1, §9: protected resources.
    INVALID_TOKEN = "invalid_token"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    INVALID_DPOP_PROOF = "invalid_dpop_proof"
    USE_DPOP_NONCE = "use_dpop_nonce"
    # PAP draft 0.2.
    SIGN_IN_REQUIRED = "sign_in_required"
    INVALID_SESSION = "invalid_session"
    # PAP 1.0: the Session named by a valid Poppy-Session header has ended (ADR 0004 §5).
    SESSION_ENDED = "session_ended"
    ACCOUNT_MISMATCH = "account_mismatch"
    EXTENSION_REQUIRED = "extension_required"
    SIGN_IN_NOT_FOUND = "sign_in_not_found"
    RATE_LIMITED = "rate_limited"
    IDEMPOTENCY_KEY_CONFLICT = "idempotency_key_conflict"
    CONVERSATION_NOT_FOUND = "conversation_not_found"
    CONVERSATION_CLOSED = "conversation_closed"
    DIRECT_CONVERSATION_OPEN = "direct_conversation_open"
    MESSAGE_ID_CONFLICT = "message_id_conflict"
    INVALID_CURSOR = "invalid_cursor"
    CURSOR_EXPIRED = "cursor_expired"
    # Operations extension v1.
    OPERATION_NOT_FOUND = "operation_not_found"
    TERMS_CHANGED = "terms_changed"
    USER_APPROVAL_REQUIRED = "user_approval_required"


class ChallengeScheme(StrEnum):
    """The authentication scheme of a ``WWW-Authenticate`` challenge."""

    DPOP = "DPoP"
    """RFC 9449 §7.1; every resource except a Bearer MCP server (PAP-4.3-11)."""
    BEARER = "Bearer"
    """RFC 6750 §3; only an MCP server without DPoP support (PAP-4.3-10)."""


class Surface(StrEnum):
    """Where an error is answered; see the module docstring."""

    OAUTH = "oauth"
    RESOURCE = "resource"


class ErrorEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the catalogue.

    Attributes:
        code: The ``error`` value.
        status: HTTP status on an OAuth/PAP JSON endpoint.
        resource_status: HTTP status at a protected resource.
        challenged: Whether a protected resource also sends it in ``WWW-Authenticate``.
        companion_header: A header that must accompany it (``Retry-After``, ``DPoP-Nonce``).
        reference: Where the code and its status are defined.
    """

    code: ErrorCode
    status: int
    resource_status: int
    challenged: bool
    reference: str
    companion_header: str | None = None


def _entry(
    code: ErrorCode,
    status: int,
    reference: str,
    *,
    resource_status: int | None = None,
    challenged: bool = False,
    companion_header: str | None = None,
) -> tuple[ErrorCode, ErrorEntry]:
    return code, ErrorEntry(
        code=code,
        status=status,
        resource_status=status if resource_status is None else resource_status,
        challenged=challenged,
        reference=reference,
        companion_header=companion_header,
    )


_C = ErrorCode
CATALOGUE: Final[Mapping[ErrorCode, ErrorEntry]] = MappingProxyType(
    dict(
        [
            _entry(_C.INVALID_REQUEST, 400, "RFC 6749 §5.2"),
            # 401 without a challenge: the client authenticates with an assertion in the
            # body, never with an Authorization header (RFC 6749 §5.2, PAP-4.1-05).
            _entry(_C.INVALID_CLIENT, 401, "RFC 6749 §5.2; PAP-4.1-05"),
            _entry(_C.INVALID_GRANT, 400, "RFC 6749 §5.2; PAP-4.8-05"),
            _entry(_C.UNAUTHORIZED_CLIENT, 400, "RFC 6749 §5.2"),
            _entry(_C.UNSUPPORTED_GRANT_TYPE, 400, "RFC 6749 §5.2"),
            _entry(_C.INVALID_SCOPE, 400, "RFC 6749 §5.2; PAP-4.4-02"),
            _entry(_C.UNSUPPORTED_RESPONSE_TYPE, 400, "RFC 6749 §4.1.2.1"),
            _entry(_C.ACCESS_DENIED, 400, "RFC 6749 §4.1.2.1; RFC 8628 §3.5"),
            _entry(_C.SERVER_ERROR, 500, "RFC 6749 §4.1.2.1"),
            _entry(_C.TEMPORARILY_UNAVAILABLE, 503, "RFC 6749 §4.1.2.1"),
            _entry(_C.AUTHORIZATION_PENDING, 400, "RFC 8628 §3.5"),
            _entry(_C.SLOW_DOWN, 400, "RFC 8628 §3.5"),
            _entry(_C.EXPIRED_TOKEN, 400, "RFC 8628 §3.5"),
            _entry(_C.INVALID_TARGET, 400, "RFC 8707 §2; PAP-4.3-09"),
            _entry(_C.UNSUPPORTED_TOKEN_TYPE, 400, "RFC 7009 §2.2.1"),
            _entry(_C.INVALID_TOKEN, 401, "RFC 6750 §3.1; PAP-4.8-01", challenged=True),
            _entry(_C.INSUFFICIENT_SCOPE, 403, "RFC 6750 §3.1; PAP §4.3", challenged=True),
            _entry(_C.INVALID_DPOP_PROOF, 400, "RFC 9449 §5, §7.1; PAP-4.3-02", resource_status=401, challenged=True),
            _entry(
                _C.USE_DPOP_NONCE,
                400,
                "RFC 9449 §8, §9; PAP-4.3-21",
                resource_status=401,
                challenged=True,
                companion_header="DPoP-Nonce",
            ),
            _entry(_C.SIGN_IN_REQUIRED, 403, "PAP §4.3, §4.9", challenged=True),
            _entry(_C.INVALID_SESSION, 400, "PAP §4.2; PAP-4.8-03"),
            # PAP 1.0: 400 with no challenge at a resource, like invalid_session (ADR 0004 §7).
            _entry(_C.SESSION_ENDED, 400, "PAP 1.0 [S §3, §4]; ADR 0004 §5"),
            _entry(_C.ACCOUNT_MISMATCH, 400, "PAP §4.4; PAP-4.8-04"),
            _entry(_C.EXTENSION_REQUIRED, 403, "PAP §3.3; OPS-2-01", challenged=True),
            _entry(_C.SIGN_IN_NOT_FOUND, 404, "PAP §4.7"),
            _entry(_C.RATE_LIMITED, 429, "PAP-4.3-18", companion_header="Retry-After"),
            _entry(_C.IDEMPOTENCY_KEY_CONFLICT, 409, "GUIDE-retry-04"),
            _entry(_C.CONVERSATION_NOT_FOUND, 404, "PAP §7.13; PAP-7.2-01"),
            _entry(_C.CONVERSATION_CLOSED, 409, "PAP §7"),
            _entry(_C.DIRECT_CONVERSATION_OPEN, 409, "PAP §7.10"),
            _entry(_C.MESSAGE_ID_CONFLICT, 409, "PAP §7.3"),
            _entry(_C.INVALID_CURSOR, 400, "PAP §7.5"),
            _entry(_C.CURSOR_EXPIRED, 410, "PAP §7.5"),
            _entry(_C.OPERATION_NOT_FOUND, 404, "OPS §3.2; OPS-3.2-01"),
            _entry(_C.TERMS_CHANGED, 409, "OPS §3.1; OPS-3.1-01"),
            _entry(_C.USER_APPROVAL_REQUIRED, 403, "OPS §5.1; OPS-5.1-05"),
        ]
    )
)
"""Every error code with its statuses and challenge rule; closed: one entry per code."""


def _check_description(text: str) -> None:
    if len(text) > _MAX_DESCRIPTION or _DESCRIPTION.fullmatch(text) is None:
        raise ValueError("error_description must be 1-200 characters of printable ASCII without '\"' or '\\'")


class ProtocolError(Exception):
    """A refusal: a catalogue entry plus optional detail. Immutable.

    Raise it from pure protocol code; the HTTP edge renders it with :meth:`to_body`,
    :meth:`status_at` and :meth:`challenge`. The description is authored by Frontdoor,
    never copied from the request.

    Args:
        code: The catalogue code.
        description: Optional ``error_description`` (printable ASCII, RFC 6749 §5.2).
        scope: For ``insufficient_scope``: the scope the request needs (RFC 6750 §3).
        extension: For ``extension_required``: the extension the agent must list (PAP §3.3).

    Raises:
        ValueError: If ``code`` is not in the catalogue, or ``description``, ``scope`` or
            ``extension`` has a character the wire format cannot carry unescaped.
    """

    __slots__ = ("_description", "_entry", "_extension", "_scope")

    _entry: ErrorEntry
    _description: str | None
    _scope: str | None
    _extension: str | None

    def __init__(
        self,
        code: ErrorCode | str,
        description: str | None = None,
        *,
        scope: str | None = None,
        extension: str | None = None,
    ) -> None:
        entry = CATALOGUE[ErrorCode(code)]
        if description is not None:
            _check_description(description)
        if scope is not None and not all(is_scope_token(token) for token in scope.split(" ")):
            raise ValueError("scope must be space-delimited scope-tokens")
        if extension is not None and extension_name_kind(extension) is ExtensionNameKind.INVALID:
            raise ValueError("extension must be a valid extension name")
        super().__init__(entry.code.value)
        object.__setattr__(self, "_entry", entry)
        object.__setattr__(self, "_description", description)
        object.__setattr__(self, "_scope", scope)
        object.__setattr__(self, "_extension", extension)

    def __setattr__(self, name: str, value: object) -> None:
        # Dunder attributes stay writable so the interpreter and tools can attach
        # tracebacks, causes and notes (BaseException.add_note sets __notes__).
        if name.startswith("__") and name.endswith("__"):
            super().__setattr__(name, value)
            return
        self._refuse_mutation()

    def __delattr__(self, name: str) -> None:
        self._refuse_mutation()

    @staticmethod
    def _refuse_mutation() -> NoReturn:
        raise AttributeError("ProtocolError is immutable; use with_description() for a copy")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.code.value, self._description, self._scope, self._extension))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProtocolError):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ProtocolError({self.code.value!r}, {self._description!r})"

    def __str__(self) -> str:
        if self._description is None:
            return self.code.value
        return f"{self.code.value}: {self._description}"

    def _key(self) -> tuple[str, str | None, str | None, str | None]:
        return (self.code.value, self._description, self._scope, self._extension)

    @property
    def entry(self) -> ErrorEntry:
        """The catalogue entry."""
        return self._entry

    @property
    def code(self) -> ErrorCode:
        """The ``error`` value."""
        return self._entry.code

    @property
    def description(self) -> str | None:
        """The ``error_description``, if any."""
        return self._description

    @property
    def scope(self) -> str | None:
        """The scope an ``insufficient_scope`` refusal names, if any."""
        return self._scope

    @property
    def extension(self) -> str | None:
        """The extension an ``extension_required`` refusal names, if any."""
        return self._extension

    @property
    def status(self) -> int:
        """The HTTP status on an OAuth/PAP JSON endpoint."""
        return self._entry.status

    def status_at(self, surface: Surface) -> int:
        """The HTTP status where the error is answered.

        Args:
            surface: The kind of endpoint answering.

        Returns:
            For example ``400`` for ``invalid_dpop_proof`` at the token endpoint and ``401``
            at an API (RFC 9449 §7.1).
        """
        return self._entry.resource_status if surface is Surface.RESOURCE else self._entry.status

    def with_description(self, text: str) -> ProtocolError:
        """A copy with ``error_description`` set (or replaced).

        Args:
            text: Frontdoor's own words; never a value from the request.

        Returns:
            A new error; this one is unchanged.

        Raises:
            ValueError: If ``text`` is empty, too long or not printable ASCII without quotes.
        """
        return ProtocolError(self.code, text, scope=self._scope, extension=self._extension)

    def to_body(self) -> dict[str, str]:
        """The JSON error body (RFC 6749 §5.2; PAP §3.3 for ``extension``).

        Returns:
            ``{"error": ...}`` with ``error_description``, ``scope`` and ``extension``
            when they are set.
        """
        body = {"error": self.code.value}
        if self._description is not None:
            body["error_description"] = self._description
        if self._scope is not None:
            body["scope"] = self._scope
        if self._extension is not None:
            body["extension"] = self._extension
        return body

    def challenge(self, scheme: ChallengeScheme = ChallengeScheme.DPOP, *, algs: Sequence[str] = ()) -> str | None:
        """The ``WWW-Authenticate`` value a protected resource sends, if the code has one.

        Args:
            scheme: The scheme the token was sent with (PAP-4.3-10, PAP-4.3-11).
            algs: For the DPoP scheme, the proof algorithms accepted (RFC 9449 §7.1).

        Returns:
            For example ``DPoP error="insufficient_scope", scope="poppy:write"``, or ``None``
            when the code is answered in the body only.

        Raises:
            ValueError: If an algorithm name has a character a challenge cannot carry.
        """
        if not self._entry.challenged:
            return None
        params = [("error", self.code.value)]
        if self._description is not None:
            params.append(("error_description", self._description))
        if self._scope is not None:
            params.append(("scope", self._scope))
        if self._extension is not None:
            params.append(("extension", self._extension))
        if scheme is ChallengeScheme.DPOP and algs:
            if not all(is_scope_token(alg) for alg in algs):
                raise ValueError("algs must be JWS algorithm names")
            params.append(("algs", " ".join(algs)))
        return f"{scheme.value} " + ", ".join(f'{name}="{value}"' for name, value in params)


def _restore(code: str, description: str | None, scope: str | None, extension: str | None) -> ProtocolError:
    return ProtocolError(code, description, scope=scope, extension=extension)
