"""Domain names a tenant may claim, in the one canonical form Frontdoor stores.

The canonical form is lowercase A-labels (IDNA 2008 with the UTS #46 mapping,
non-transitional), without a trailing dot: ``Bücher.Example.`` becomes
``xn--bcher-kva.example``. Anything that is not a plain host name a company could
own is refused with an :class:`InvalidDomain` whose ``code`` is stable, so the
edge can map it to a 422 and clients can branch on it. Messages never echo the
input.
"""

import ipaddress
import re
from enum import StrEnum

import idna

from frontdoor_tenancy.domains.public_suffix import is_public_suffix

CHALLENGE_LABEL = "_frontdoor-challenge"
"""The label under which a claim's TXT record is published."""

MAX_NAME_LENGTH = 253
"""RFC 1035 §2.3.4: 255 octets on the wire, 253 characters in text form."""

MAX_LABEL_LENGTH = 63
"""RFC 1035 §2.3.4."""

MAX_DOMAIN_LENGTH = MAX_NAME_LENGTH - len(CHALLENGE_LABEL) - 1
"""232: a longer domain could be claimed but its challenge name could not exist."""

_MAX_INPUT_LENGTH = 1024
# Bounds the work done on hostile input before any mapping. UTS #46 can only
# drop or fold characters, but no plausible name needs more than this.

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_LDH_LABEL = re.compile(r"^[a-z0-9-]+$")
# WHATWG URL host parsing treats a name whose last label is numeric (decimal or
# 0x-hex) as an IPv4 address (``127.1``, ``0x7f.1``); no TLD is numeric.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")


class InvalidDomainCode(StrEnum):
    """Stable reasons a domain is refused; the values are part of the API."""

    EMPTY = "empty"
    TOO_LONG = "too_long"
    LABEL_TOO_LONG = "label_too_long"
    EMPTY_LABEL = "empty_label"
    SINGLE_LABEL = "single_label"
    IP_ADDRESS = "ip_address"
    LOCALHOST = "localhost"
    PUBLIC_SUFFIX = "public_suffix"
    HAS_SCHEME = "has_scheme"
    HAS_USERINFO = "has_userinfo"
    HAS_PORT = "has_port"
    HAS_PATH = "has_path"
    HAS_QUERY = "has_query"
    HAS_FRAGMENT = "has_fragment"
    WILDCARD = "wildcard"
    WHITESPACE = "whitespace"
    INVALID_CHARACTERS = "invalid_characters"
    INVALID_HYPHEN = "invalid_hyphen"
    INVALID_IDNA = "invalid_idna"


class InvalidDomain(ValueError):
    """A domain the service refuses to claim.

    Attributes:
        code: The stable reason.
        message: A human-readable explanation that does not repeat the input.
    """

    def __init__(self, code: InvalidDomainCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"InvalidDomain({self.code.value!r}, {self.message!r})"


def normalize_domain(raw: str) -> str:
    """Turn user input into the canonical domain, or refuse it.

    Args:
        raw: The domain as typed, e.g. ``" Bücher.example. "``.

    Returns:
        Lowercase A-labels without a trailing dot, e.g. ``xn--bcher-kva.example``.

    Raises:
        InvalidDomain: If the input is empty, too long, a URL rather than a
            name (scheme, userinfo, port, path, query, fragment), an IP address,
            a wildcard, ``localhost`` or below it, a single label, not valid
            IDNA 2008 / LDH, or exactly a public suffix (ICANN or private).
    """
    text = raw.strip()
    if not text:
        raise InvalidDomain(InvalidDomainCode.EMPTY, "Enter a domain name.")
    if len(text) > _MAX_INPUT_LENGTH:
        raise _too_long()
    _refuse_url_parts(text)
    mapped = _uts46_map(text)
    if mapped.endswith("."):
        mapped = mapped[:-1]
    if not mapped:
        raise InvalidDomain(InvalidDomainCode.EMPTY, "Enter a domain name.")
    labels = mapped.split(".")
    if any(not label for label in labels):
        raise InvalidDomain(
            InvalidDomainCode.EMPTY_LABEL, "The domain has an empty label (two dots in a row, or a leading dot)."
        )
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        raise _ip_address()
    domain = ".".join(_to_a_label(label) for label in labels)
    if len(domain) > MAX_DOMAIN_LENGTH:
        raise _too_long()
    if labels[-1] == "localhost":
        raise InvalidDomain(InvalidDomainCode.LOCALHOST, "localhost and names below it cannot be claimed.")
    if len(labels) == 1:
        raise InvalidDomain(InvalidDomainCode.SINGLE_LABEL, "Enter a fully qualified domain name such as example.com.")
    if is_public_suffix(domain):
        raise InvalidDomain(
            InvalidDomainCode.PUBLIC_SUFFIX,
            "The domain is a public suffix (such as co.uk or github.io); claim a domain registered under it.",
        )
    return domain


def challenge_name(domain: str) -> str:
    """Build the DNS name that carries a domain's challenge TXT record.

    Args:
        domain: A domain already returned by :func:`normalize_domain`.

    Returns:
        ``_frontdoor-challenge.<domain>``.

    Raises:
        ValueError: If ``domain`` is visibly not canonical (empty, uppercase,
            non-ASCII, surrounding dots or whitespace, too long); that is a
            programming error, not user input.
    """
    if (
        not domain
        or not domain.isascii()
        or domain != domain.strip().lower()
        or domain.startswith(".")
        or domain.endswith(".")
        or len(domain) > MAX_DOMAIN_LENGTH
    ):
        raise ValueError("challenge_name expects a domain returned by normalize_domain")
    return f"{CHALLENGE_LABEL}.{domain}"


def _refuse_url_parts(text: str) -> None:
    # Checked in URL order so "https://user@host:1/p" reports its scheme first.
    if _SCHEME.match(text):
        raise InvalidDomain(
            InvalidDomainCode.HAS_SCHEME, "Enter the domain name only, without https:// or another scheme."
        )
    if any(char.isspace() for char in text):
        raise InvalidDomain(InvalidDomainCode.WHITESPACE, "The domain must not contain spaces.")
    if "@" in text:
        raise InvalidDomain(InvalidDomainCode.HAS_USERINFO, "The domain must not contain a user name ('@').")
    if "/" in text or "\\" in text:
        raise InvalidDomain(InvalidDomainCode.HAS_PATH, "Enter the domain name only, without a path.")
    if "?" in text:
        raise InvalidDomain(InvalidDomainCode.HAS_QUERY, "Enter the domain name only, without a query string.")
    if "#" in text:
        raise InvalidDomain(InvalidDomainCode.HAS_FRAGMENT, "Enter the domain name only, without a fragment.")
    if text.startswith("["):
        host = text[1:].partition("]")[0]
        if _is_ip_address(host):
            raise _ip_address()
        raise InvalidDomain(InvalidDomainCode.INVALID_CHARACTERS, "The domain must not contain brackets.")
    if _is_ip_address(text):
        raise _ip_address()
    if ":" in text:
        if _is_ip_address(text.rpartition(":")[0]):
            raise _ip_address()
        raise InvalidDomain(InvalidDomainCode.HAS_PORT, "Enter the domain name only, without a port (':').")
    if "*" in text:
        raise InvalidDomain(InvalidDomainCode.WILDCARD, "Wildcards cannot be claimed; enter one domain name.")


def _uts46_map(text: str) -> str:
    # UTS #46 mapping (non-transitional): case folding, width folding, NFC and
    # ideographic full stops to ".". STD3 rules refuse ASCII outside LDH, which
    # includes characters that only appear after mapping (fullwidth "/" etc.).
    try:
        return idna.uts46_remap(text, std3_rules=True, transitional=False)
    except idna.IDNAError:
        raise InvalidDomain(
            InvalidDomainCode.INVALID_CHARACTERS,
            "The domain may only contain letters, digits, hyphens and dots.",
        ) from None


def _to_a_label(label: str) -> str:
    if len(label) > MAX_LABEL_LENGTH:
        raise _label_too_long()
    if label.startswith("-") or label.endswith("-"):
        raise InvalidDomain(InvalidDomainCode.INVALID_HYPHEN, "A label must not start or end with a hyphen.")
    if label.isascii():
        if not _LDH_LABEL.fullmatch(label):
            raise InvalidDomain(
                InvalidDomainCode.INVALID_CHARACTERS,
                "The domain may only contain letters, digits, hyphens and dots.",
            )
        if label[2:4] == "--" and not label.startswith("xn--"):
            # RFC 5891 §4.2.3.1: "??--" is reserved for A-labels and future prefixes.
            raise InvalidDomain(
                InvalidDomainCode.INVALID_HYPHEN, "A label must not have hyphens in its third and fourth positions."
            )
        if label.startswith("xn--"):
            _check_idna(label)
        return label
    if label[2:4] == "--":
        raise InvalidDomain(
            InvalidDomainCode.INVALID_HYPHEN, "A label must not have hyphens in its third and fourth positions."
        )
    _check_idna(label)
    a_label = "xn--" + label.encode("punycode").decode("ascii")
    if len(a_label) > MAX_LABEL_LENGTH:
        raise _label_too_long()
    return a_label


def _check_idna(label: str) -> None:
    # ulabel() validates an xn-- label (canonical Punycode, IDNA 2008 code
    # points, contextual and bidi rules); for a U-label it runs the same checks.
    try:
        idna.ulabel(label)
    except (idna.IDNAError, UnicodeError):
        raise InvalidDomain(
            InvalidDomainCode.INVALID_IDNA, "The domain contains a label that is not valid IDNA 2008."
        ) from None


def _is_ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ip_address() -> InvalidDomain:
    return InvalidDomain(InvalidDomainCode.IP_ADDRESS, "IP addresses cannot be claimed; enter a domain name.")


def _too_long() -> InvalidDomain:
    return InvalidDomain(
        InvalidDomainCode.TOO_LONG,
        f"The domain is longer than {MAX_DOMAIN_LENGTH} characters, so its challenge record name"
        f" would exceed the DNS limit of {MAX_NAME_LENGTH}.",
    )


def _label_too_long() -> InvalidDomain:
    return InvalidDomain(
        InvalidDomainCode.LABEL_TOO_LONG, f"Each part of the domain must be at most {MAX_LABEL_LENGTH} characters."
    )
