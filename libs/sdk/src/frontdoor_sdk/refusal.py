"""Refusals ready to send: status, ``WWW-Authenticate`` challenges and the JSON body.

At an API (and every endpoint but an MCP server) the only scheme is ``DPoP``, so every
challenge is a ``DPoP`` one with ``algs`` (RFC 9449 §7.1), whatever scheme the request
used. At an MCP server there is one challenge per scheme it takes, ``Bearer`` first, each
with ``resource_metadata`` (RFC 9728 §5.1, PAP §6). A request that sent no credential the
resource understands gets challenges without ``error`` (RFC 6750 §3.1). Nothing is taken
from the request, so no token is ever echoed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec
from frontdoor_protocol import (
    REQUIRED_DPOP_ALGORITHM,
    ChallengeScheme,
    ErrorCode,
    MissingToken,
    ProtocolError,
    Surface,
)

from frontdoor_sdk.protected_resource import protected_resource_metadata_url

__all__ = ["Refusal", "challenge", "delegated_refusal", "mcp_challenge", "refusal"]

_ENCODER: Final = msgspec.json.Encoder()
_DEFAULT_ALGS: Final = (REQUIRED_DPOP_ALGORITHM,)
_DEFAULT_RETRY_AFTER: Final = "2"
_SESSION_ERRORS: Final = frozenset({ErrorCode.INVALID_SESSION, ErrorCode.SESSION_ENDED})


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """An answer to send instead of serving the request.

    Attributes:
        status: The HTTP status: 400, 401, 403, 500 or 503.
        error: The ``error`` code, for your logs (never a credential).
        headers: ``Content-Type``, ``Cache-Control: no-store``, and as the error needs
            ``WWW-Authenticate``, ``DPoP-Nonce`` or ``Retry-After``.
        body: ``{"error", "error_description"?, "scope"?}`` (RFC 6749 §5.2 shape).
    """

    status: int
    error: str
    headers: dict[str, str]
    body: dict[str, str]

    @property
    def content(self) -> bytes:
        """The body, encoded as JSON."""
        return _ENCODER.encode(self.body)


def _parameters(error: ProtocolError | None) -> list[tuple[str, str]]:
    if error is None or isinstance(error, MissingToken):
        return []
    params = [("error", error.code.value)]
    if error.description is not None:
        params.append(("error_description", error.description))
    if error.scope is not None:
        params.append(("scope", error.scope))
    return params


def _render(scheme: ChallengeScheme, params: Sequence[tuple[str, str]]) -> str:
    if not params:
        return scheme.value
    return f"{scheme.value} " + ", ".join(f'{name}="{value}"' for name, value in params)


def challenge(
    error: ProtocolError | None,
    *,
    resource_url: str | None = None,
    mcp_dpop: bool = True,
    algs: Sequence[str] = _DEFAULT_ALGS,
) -> str:
    """The ``WWW-Authenticate`` value for a refusal at an API or an MCP server.

    Args:
        error: The refusal; ``None`` (or a :class:`MissingToken`) for a bare challenge.
        resource_url: The MCP server's ``url`` when answering there, else ``None``.
        mcp_dpop: Whether that MCP server takes DPoP tokens (adds the ``DPoP`` challenge).
        algs: The DPoP proof algorithms accepted.

    Returns:
        For example ``DPoP error="invalid_token", error_description="...", algs="ES256"``.

    Raises:
        ValueError: If ``resource_url`` is not an absolute http(s) URL.
    """
    params = _parameters(error)
    dpop = [*params, ("algs", " ".join(algs))]
    if resource_url is None:
        return _render(ChallengeScheme.DPOP, dpop)
    metadata = ("resource_metadata", protected_resource_metadata_url(resource_url))
    challenges = [_render(ChallengeScheme.BEARER, [*params, metadata])]
    if mcp_dpop:
        challenges.append(_render(ChallengeScheme.DPOP, [*dpop, metadata]))
    return ", ".join(challenges)


def mcp_challenge(resource_url: str, error: ProtocolError | None = None, *, dpop: bool = True) -> str:
    """The ``WWW-Authenticate`` value of an MCP server (RFC 9728 §5.1, PAP-6-06).

    Args:
        resource_url: The MCP server's ``url``.
        error: The refusal, or ``None`` for a request without a token.
        dpop: Whether the server takes DPoP tokens.

    Returns:
        ``Bearer resource_metadata="..."`` and, with ``dpop``, a ``DPoP`` challenge too.
    """
    return challenge(error, resource_url=resource_url, mcp_dpop=dpop)


def refusal(
    error: ProtocolError,
    *,
    resource_url: str | None = None,
    mcp_dpop: bool = True,
    dpop_nonce: str | None = None,
    retry_after: str | None = None,
    algs: Sequence[str] = _DEFAULT_ALGS,
) -> Refusal:
    """Render a protected resource's refusal.

    Args:
        error: What went wrong (Frontdoor's catalogue).
        resource_url: The MCP server's ``url`` when answering there, else ``None``.
        mcp_dpop: Whether that MCP server takes DPoP tokens.
        dpop_nonce: The nonce to send in ``DPoP-Nonce`` with ``use_dpop_nonce``.
        retry_after: Seconds for ``Retry-After`` on 429 and 503.
        algs: The DPoP proof algorithms accepted.

    Returns:
        The status, headers and body to send.

    Raises:
        ValueError: For ``use_dpop_nonce`` without ``dpop_nonce``.
    """
    status = error.status_at(Surface.RESOURCE)
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
    if error.entry.challenged or error.code is ErrorCode.INVALID_REQUEST:
        headers["WWW-Authenticate"] = challenge(error, resource_url=resource_url, mcp_dpop=mcp_dpop, algs=algs)
    if error.code is ErrorCode.USE_DPOP_NONCE:
        if not dpop_nonce:
            raise ValueError("use_dpop_nonce needs the nonce to send")
        headers["DPoP-Nonce"] = dpop_nonce
    if status in (429, 503):
        headers["Retry-After"] = retry_after or _DEFAULT_RETRY_AFTER
    return Refusal(status=status, error=error.code.value, headers=headers, body=error.to_body())


def delegated_refusal(
    error: ProtocolError,
    *,
    resource_metadata: str,
    scheme: ChallengeScheme | None = None,
    retry_after: str | None = None,
    algs: Sequence[str] = _DEFAULT_ALGS,
) -> Refusal:
    """Render a refusal at a PAP 1.0 resource (ADR 0004 §7).

    - ``invalid_session`` and ``session_ended``: 400, the JSON body only, no challenge
      (the Session header is not an OAuth credential).
    - ``invalid_token``, ``invalid_dpop_proof``, ``insufficient_scope``, ``invalid_request``:
      the OAuth challenge of the scheme the access token came with (``Bearer`` when none;
      always ``DPoP`` for a proof), with ``resource_metadata`` (RFC 9728 §5.1).
    - ``sign_in_required``: 401 with ``Bearer scope="...", resource_metadata="..."`` and no
      ``error`` in the challenge (the request carried no access token: RFC 6750 §3.1), the
      code in the body.
    - ``temporarily_unavailable``: 503 with ``Retry-After``.

    Args:
        error: What went wrong (Frontdoor's catalogue).
        resource_metadata: The URL of the protected-resource metadata the agent reads to
            find where to sign in: the company's ``/.well-known/oauth-protected-resource``,
            or the MCP server's.
        scheme: The scheme the access token was sent with, if any.
        retry_after: Seconds for ``Retry-After`` on 429 and 503.
        algs: The DPoP proof algorithms accepted.

    Returns:
        The status, headers and body to send.
    """
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
    metadata = ("resource_metadata", resource_metadata)
    code = error.code
    if code in _SESSION_ERRORS:
        status = 400
    elif code is ErrorCode.SIGN_IN_REQUIRED:
        status = 401
        params = [("scope", error.scope)] if error.scope is not None else []
        headers["WWW-Authenticate"] = _render(ChallengeScheme.BEARER, [*params, metadata])
    else:
        status = error.status_at(Surface.RESOURCE)
        if error.entry.challenged or code is ErrorCode.INVALID_REQUEST:
            used = ChallengeScheme.DPOP if code is ErrorCode.INVALID_DPOP_PROOF else scheme or ChallengeScheme.BEARER
            params = _parameters(error)
            if used is ChallengeScheme.DPOP:
                params.append(("algs", " ".join(algs)))
            headers["WWW-Authenticate"] = _render(used, [*params, metadata])
    if status in (429, 503):
        headers["Retry-After"] = retry_after or _DEFAULT_RETRY_AFTER
    return Refusal(status=status, error=code.value, headers=headers, body=error.to_body())
