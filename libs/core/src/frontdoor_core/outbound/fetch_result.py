"""What a successful outbound fetch returns."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

__all__ = ["FetchResult"]


class FetchResult(msgspec.Struct, frozen=True, kw_only=True):
    """A fetched document, after redirects, within every limit of the policy.

    Attributes:
        final_url: The URL that answered with the body.
        status: Its HTTP status (2xx; any status from `SafeFetcher.post`).
        headers: Response headers with lower-cased names. Repeated fields are joined
            with ``", "`` in arrival order (RFC 9110 §5.3).
        body: The raw body (no content coding was accepted), at most ``max_bytes``.
        redirect_chain: Every URL requested, in order: the first is the requested
            URL, the last is ``final_url``; one entry when there was no redirect.
        elapsed: Seconds from the start of the fetch to the last body byte.
        truncated: True when `SafeFetcher.post` cut the body at its limit (`fetch`
            and `post_json` refuse an oversized body instead).
    """

    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    redirect_chain: tuple[str, ...]
    elapsed: float
    truncated: bool = False
