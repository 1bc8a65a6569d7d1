"""What a TXT lookup can answer, and the interface use cases depend on.

The three outcomes keep "the record is not there" apart from "we could not
tell": only :class:`Found` and :class:`Absent` are evidence, so the lifecycle
never verifies or suspends a domain on an :class:`Indeterminate` answer. This
module is pure; :mod:`.txt_resolver` implements :class:`TxtLookup` with
dnspython, and tests may inject any other implementation.
"""

from typing import Literal, Protocol

import msgspec

AbsentReason = Literal["nxdomain", "no_answer"]
IndeterminateReason = Literal["timeout", "servfail", "refused", "error"]


class Found(msgspec.Struct, frozen=True):
    """The name has TXT records.

    Attributes:
        values: One entry per TXT record, in the order received. A record's
            character-strings are joined without a separator (RFC 7208 §3.3
            convention) and decoded as UTF-8, invalid bytes replaced.
    """

    values: tuple[str, ...]


class Absent(msgspec.Struct, frozen=True):
    """An authoritative answer that there is no TXT record at the name.

    Attributes:
        reason: ``nxdomain`` (the name does not exist) or ``no_answer`` (it
            exists, without TXT records).
    """

    reason: AbsentReason


class Indeterminate(msgspec.Struct, frozen=True):
    """No usable answer; says nothing about whether the record exists.

    Attributes:
        reason: ``timeout``, ``servfail``, ``refused`` or ``error`` (anything
            else: unreachable servers, malformed answers, YXDOMAIN...).
    """

    reason: IndeterminateReason


TxtLookupResult = Found | Absent | Indeterminate


class TxtLookup(Protocol):
    """Looks up the TXT records at a DNS name."""

    async def lookup(self, name: str) -> TxtLookupResult:
        """Resolve the TXT records at ``name``.

        Args:
            name: An absolute ASCII DNS name, with or without trailing dot.

        Returns:
            The outcome; failures are :class:`Indeterminate`, never raised.
        """
        ...
