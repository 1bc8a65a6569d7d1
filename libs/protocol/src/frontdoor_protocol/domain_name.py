"""DNS domain names as the protocol compares them (PAP §3.1, §3.2).

A company's ``organization.domain`` and the entries of ``poppy_domains`` are compared
"ignoring case, with no other normalization" (PAP-3.1-02, PAP-3.2-04): ``www.`` is not
stripped, a trailing dot is not removed, and only ASCII letters fold. Unicode case
folding is deliberately avoided: ``"\\u212a".lower()`` (KELVIN SIGN) is ASCII ``k``, which
would let a look-alike name compare equal.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["domains_equal", "is_domain_name", "normalize_domain"]

_MAX_LENGTH: Final = 253
# LDH labels (RFC 1035 §2.3.1, RFC 5890 A-labels included), at least two of them, the last
# not all digits so an IPv4 address is not taken for a name.
_LABEL: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DOMAIN: Final = re.compile(rf"(?:{_LABEL}\.)+(?=[A-Za-z0-9-]*[A-Za-z])({_LABEL})")


def is_domain_name(value: object) -> bool:
    """Whether ``value`` is a fully qualified DNS name written without a trailing dot.

    Args:
        value: Anything, typically a decoded JSON member.

    Returns:
        ``True`` for names such as ``shop.example`` or ``xn--bcher-kva.example``.
    """
    return (
        isinstance(value, str)
        and value.isascii()
        and len(value) <= _MAX_LENGTH
        and _DOMAIN.fullmatch(value) is not None
    )


def normalize_domain(value: str) -> str:
    """The form a domain is stored and compared in: ASCII lower case, nothing else changed.

    Args:
        value: A domain name; validate it with :func:`is_domain_name` first.

    Returns:
        ``value`` with ASCII letters lowered.

    Raises:
        ValueError: If ``value`` holds non-ASCII characters.
    """
    if not value.isascii():
        raise ValueError("domain names are compared in their ASCII (A-label) form")
    return value.lower()


def domains_equal(left: str, right: str) -> bool:
    """Compare two domains ignoring ASCII case only (PAP-3.1-02, PAP-3.2-04).

    Args:
        left: One domain or host name.
        right: The other.

    Returns:
        ``True`` when they are the same name; ``False`` whenever either is not ASCII.
    """
    if not (left.isascii() and right.isascii()):
        return False
    return left.lower() == right.lower()
