"""What outbound fetches of untrusted URLs may do: the knobs of `SafeFetcher`."""

from __future__ import annotations

import msgspec

__all__ = ["DEFAULT_USER_AGENT", "OutboundPolicy", "user_agent"]

PRODUCT = "Frontdoor/0.1"
DEFAULT_USER_AGENT = PRODUCT
"""The product alone: a policy built without a deployment's URL names none (no made-up one)."""


def user_agent(about_url: str, product: str = PRODUCT) -> str:
    """``{product} (+{about_url})``: the product and where whoever receives the request can
    read about it, a page the deployment itself serves (its console, or its published docs)."""
    return f"{product} (+{about_url})" if about_url else product


class OutboundPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Limits and exceptions for fetching untrusted URLs (protocol §4.1).

    Attributes:
        allow_http_loopback: Development only. Plain ``http`` is then accepted for
            loopback hosts (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``::1``),
            and those hosts may connect to loopback addresses. Never in production.
        allowlist: CIDR networks (``"127.0.0.1/32"``, ``"10.1.0.0/16"``) or exact host
            names (``"agent.test"``) that bypass the address rules. A host name entry
            accepts any address its name resolves to; a network entry accepts the
            addresses inside it. Neither relaxes the HTTPS rule.
        max_redirects: Redirects followed before ``too_many_redirects``.
        max_bytes: Largest accepted response body, in bytes (``too_large``).
        max_header_bytes: Largest accepted response header block, in bytes.
        total_timeout: Deadline in seconds for the whole fetch: every DNS lookup,
            connection, TLS handshake, redirect and body byte (``timeout``).
        connect_timeout: Deadline in seconds for one TCP connect plus TLS handshake.
        user_agent: The ``User-Agent`` sent with every request.
        accepted_content_types: Media types accepted when JSON is expected; a
            ``type/*+suffix`` entry matches any structured-syntax subtype.
    """

    allow_http_loopback: bool = False
    allowlist: tuple[str, ...] = ()
    max_redirects: int = 3
    max_bytes: int = 100_000
    max_header_bytes: int = 16_384
    total_timeout: float = 5.0
    connect_timeout: float = 3.0
    user_agent: str = DEFAULT_USER_AGENT
    accepted_content_types: tuple[str, ...] = ("application/json", "application/*+json")

    def __post_init__(self) -> None:
        """Refuse nonsensical limits at start-up rather than at the first fetch.

        Raises:
            ValueError: A limit is negative or zero where it must be positive.
        """
        if self.max_redirects < 0:
            raise ValueError("max_redirects must be >= 0")
        if self.max_bytes <= 0 or self.max_header_bytes <= 0:
            raise ValueError("max_bytes and max_header_bytes must be > 0")
        if self.total_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("timeouts must be > 0")
