"""Matching a response's ``Content-Type`` against accepted media types."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["media_type_matches"]


def media_type_matches(content_type: str, accepted: Iterable[str]) -> bool:
    """Whether a ``Content-Type`` value names one of the accepted media types.

    Parameters (``; charset=utf-8``) are ignored; comparison is case-insensitive
    (RFC 9110 §8.3.1). An accepted entry ``type/*+suffix`` matches any subtype with
    that structured-syntax suffix (RFC 6839), e.g. ``application/jwk-set+json``.

    Args:
        content_type: The header value as received.
        accepted: Media types such as ``application/json`` or ``application/*+json``.

    Returns:
        True when the media type is accepted.
    """
    essence = content_type.split(";", 1)[0].strip().lower()
    kind, slash, subtype = essence.partition("/")
    if not slash or not kind or not subtype or "," in essence:
        return False
    for entry in accepted:
        want_kind, _, want_sub = entry.lower().partition("/")
        if want_kind != kind:
            continue
        if want_sub == subtype:
            return True
        if want_sub.startswith("*+") and subtype.endswith(want_sub[1:]) and (len(subtype) > len(want_sub) - 1):
            return True
    return False
