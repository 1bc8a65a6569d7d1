"""The random token a tenant publishes in DNS to prove it controls a domain.

The token is 160 bits from :mod:`secrets`, written as lowercase RFC 4648 base32
without padding: 160 is a multiple of 5, so it is exactly 32 characters, each
carrying 5 random bits, with no padding and no biased last character. The
alphabet ``a-z2-7`` has nothing (``+``, ``/``, ``=``, quotes) that DNS hosting
panels, zone files or shells treat specially, so a token pasted anywhere survives.
"""

import base64
import re
import secrets

TOKEN_BYTES = 20
"""160 random bits; the requirement is at least 128."""

TOKEN_LENGTH = TOKEN_BYTES * 8 // 5
"""32 base32 characters."""

CHALLENGE_VALUE_PREFIX = "frontdoor-verify="
"""What precedes the token in the TXT record value."""

_TOKEN = re.compile(r"^[a-z2-7]{26,}$")
# Accepts any lowercase base32 token of at least 128 bits (26 characters), so
# values built from tokens issued under a future length still render.


def new_challenge_token() -> str:
    """Draw a fresh challenge token.

    Returns:
        32 characters of lowercase base32 (``a-z``, ``2-7``) encoding 160 bits
        from the operating system's CSPRNG.
    """
    raw = secrets.token_bytes(TOKEN_BYTES)
    return base64.b32encode(raw).decode("ascii").lower()


def challenge_value(token: str) -> str:
    """Build the TXT record value that carries a token.

    Args:
        token: A token from :func:`new_challenge_token`.

    Returns:
        ``frontdoor-verify=<token>``.

    Raises:
        ValueError: If ``token`` is not lowercase base32 of at least 128 bits.
    """
    if not _TOKEN.fullmatch(token):
        raise ValueError("challenge token must be lowercase base32 of at least 128 bits")
    return f"{CHALLENGE_VALUE_PREFIX}{token}"
