"""Admin email addresses: a pragmatic syntax check, normalisation, and the rate-limit key.

One address has many spellings: ``Admin@Demo.Example``, `` admin@demo.example. ``,
fullwidth ``ａｄｍｉｎ@ｄｅｍｏ.example``, a U-label domain and its A-label. They all
name one admin, so they must find one row and count against one login limit.
"""

from __future__ import annotations

import re
import unicodedata

import idna

__all__ = ["email_key", "normalize_email"]

_LOCAL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}$")


def _fold(raw: str) -> str:
    # NFKC first: fullwidth letters, ligatures and compatibility forms become their plain
    # form before the syntax check, so they cannot slip past it as "different" addresses.
    return unicodedata.normalize("NFKC", raw).strip().casefold()


def normalize_email(raw: str) -> str:
    """``local@domain`` in NFKC, case-folded, with an IDNA (A-label) domain and no trailing dot.

    Raises:
        ValueError: with a short message fit for a form field.
    """
    text = _fold(raw)
    if len(text) > 254 or text.count("@") != 1:
        raise ValueError("not an email address")
    local, domain = text.rsplit("@", 1)
    if not _LOCAL.match(local) or local.startswith(".") or local.endswith(".") or ".." in local:
        raise ValueError("not an email address")
    try:
        # UTS 46 also maps the ideographic full stop and friends to "."
        ascii_domain = idna.encode(domain.rstrip("."), uts46=True).decode().rstrip(".")
    except idna.IDNAError:
        raise ValueError("not an email address") from None
    if "." not in ascii_domain:
        raise ValueError("not an email address")
    return f"{local}@{ascii_domain}".lower()


def email_key(raw: str) -> str:
    """The per-email rate-limit key of whatever was typed in an email field.

    A valid address is keyed by `normalize_email`; anything else by its NFKC, case-folded,
    stripped form without trailing dots, so malformed variants of one string still share
    a bucket (and never reach the database).
    """
    try:
        return normalize_email(raw)
    except ValueError:
        return _fold(raw).rstrip(".")[:254]
