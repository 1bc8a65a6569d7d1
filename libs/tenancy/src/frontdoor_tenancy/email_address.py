"""Admin email addresses: a pragmatic syntax check and normalisation (lowercase)."""

from __future__ import annotations

import re

import idna

__all__ = ["normalize_email"]

_LOCAL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}$")


def normalize_email(raw: str) -> str:
    """Lowercased ``local@domain`` with an IDNA domain.

    Raises:
        ValueError: with a short message fit for a form field.
    """
    text = raw.strip()
    if len(text) > 254 or text.count("@") != 1:
        raise ValueError("not an email address")
    local, domain = text.rsplit("@", 1)
    if not _LOCAL.match(local) or local.startswith(".") or local.endswith(".") or ".." in local:
        raise ValueError("not an email address")
    try:
        ascii_domain = idna.encode(domain.rstrip("."), uts46=True).decode()
    except idna.IDNAError:
        raise ValueError("not an email address") from None
    if "." not in ascii_domain:
        raise ValueError("not an email address")
    return f"{local}@{ascii_domain}".lower()
