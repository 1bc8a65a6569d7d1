"""Admin passwords: argon2id hashing and the strength rules applied when one is set.

Hashing uses argon2id with the parameters of RFC 9106 §4's second recommended option
(argon2-cffi's ``RFC_9106_LOW_MEMORY`` profile): 64 MiB of memory, 3 passes, 4 lanes,
16-byte salt, 32-byte tag; about 0.1 s per hash on one server core. The parameters are
pinned here rather than taken from the library's defaults, so a library upgrade cannot
change them silently; :func:`needs_rehash` tells when a stored hash predates a change.

Passwords are NFKC-normalised before hashing and checking (NIST SP 800-63B §5.1.1.2),
so the same password typed on different keyboards or systems verifies.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from importlib.resources import files

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = [
    "DUMMY_PASSWORD_HASH",
    "MAX_PASSWORD_LENGTH",
    "MIN_PASSWORD_LENGTH",
    "check_password_strength",
    "hash_password",
    "needs_rehash",
    "verify_password",
]

MIN_PASSWORD_LENGTH = 12
"""Fewest characters (after NFKC) a new password may have."""

MAX_PASSWORD_LENGTH = 256
"""Most characters (after NFKC) a new password may have."""

_HASHER = PasswordHasher(
    time_cost=3,
    memory_cost=64 * 1024,
    parallelism=4,
    hash_len=32,
    salt_len=16,
    type=Type.ID,
)

DUMMY_PASSWORD_HASH = (
    "$argon2id$v=19$m=65536,t=3,p=4$JtNgNW1GcWY4XnB0quw76A$vUEP0cZvxi3jMJY3eaWuj2LxtKEjhtC8bgESJOOXMMU"
)
"""A hash of a discarded random password, made with the current parameters.

When a login names an unknown email, verify the candidate against this hash (and
ignore the result) so the answer takes as long as for a known email with a wrong
password, and the two cases cannot be told apart by timing.
"""

_LEET = str.maketrans({"@": "a", "4": "a", "0": "o", "3": "e", "$": "s", "5": "s", "7": "t"})
_EDGE_NON_LETTERS = re.compile(r"^[^a-z]+|[^a-z]+$")
_NON_ALNUM = re.compile(r"[\W_]+")
_MIN_IDENTITY_LENGTH = 3
_MIN_NAME_WORD_LENGTH = 4


def hash_password(password: str) -> str:
    """Hash a password for storage.

    Args:
        password: The password as typed.

    Returns:
        An argon2id PHC string (``$argon2id$v=19$m=...``) with a fresh salt.
    """
    return _HASHER.hash(_normalise(password))


def verify_password(password_hash: str, candidate: str) -> bool:
    """Check a candidate password against a stored hash.

    The comparison is argon2's own constant-time one; every failure, including a
    corrupt or foreign stored hash, answers False instead of raising.

    Args:
        password_hash: The stored PHC string (or :data:`DUMMY_PASSWORD_HASH`).
        candidate: The password as typed.

    Returns:
        True only when the candidate is the password.
    """
    try:
        return _HASHER.verify(password_hash, _normalise(candidate))
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """Tell whether a stored hash should be replaced after the next successful login.

    Args:
        password_hash: The stored PHC string.

    Returns:
        True when it was made with other parameters than the current ones, or is not
        a valid argon2 hash.
    """
    try:
        return _HASHER.check_needs_rehash(password_hash)
    except (InvalidHashError, ValueError):
        return True


def check_password_strength(password: str, *, email: str, org_name: str) -> list[str]:
    """List the reasons to refuse a new password; an empty list accepts it.

    Codes, in this order: ``too_short`` (under 12 characters), ``too_long`` (over
    256), ``single_character`` (one character repeated), ``only_digits``,
    ``contains_email`` (the email's local part, 3+ characters, ignoring case and
    punctuation), ``contains_organization_name`` (the name, or one of its words of 4+
    characters), ``common_password`` (in the embedded list of common passwords, also
    after removing leading/trailing digits and symbols and undoing common character
    substitutions such as ``@`` for ``a``).

    Args:
        password: The proposed password.
        email: The admin's email address.
        org_name: The organisation's name.

    Returns:
        Refusal codes, each at most once.
    """
    text = _normalise(password)
    codes: list[str] = []
    if len(text) < MIN_PASSWORD_LENGTH:
        codes.append("too_short")
    if len(text) > MAX_PASSWORD_LENGTH:
        codes.append("too_long")
    if text and len(set(text)) == 1:
        codes.append("single_character")
    if text.isdecimal():
        codes.append("only_digits")
    compact = _compact(text)
    if any(part in compact for part in _email_parts(email)):
        codes.append("contains_email")
    if any(part in compact for part in _name_parts(org_name)):
        codes.append("contains_organization_name")
    if _is_common(text):
        codes.append("common_password")
    return codes


def _normalise(password: str) -> str:
    return unicodedata.normalize("NFKC", password)


def _compact(text: str) -> str:
    return _NON_ALNUM.sub("", _normalise(text).casefold())


def _email_parts(email: str) -> set[str]:
    local = email.rpartition("@")[0] if "@" in email else email
    candidates = {_compact(local), _compact(local.partition("+")[0])}
    return {part for part in candidates if len(part) >= _MIN_IDENTITY_LENGTH}


def _name_parts(org_name: str) -> set[str]:
    whole = _compact(org_name)
    parts = {whole} if len(whole) >= _MIN_IDENTITY_LENGTH else set()
    words = _NON_ALNUM.split(_normalise(org_name).casefold())
    parts.update(word for word in words if len(word) >= _MIN_NAME_WORD_LENGTH)
    return parts


def _is_common(text: str) -> bool:
    folded = text.casefold()
    forms = {folded, folded.translate(_LEET)}
    forms |= {_EDGE_NON_LETTERS.sub("", form) for form in list(forms)}
    forms |= {form.translate(_LEET) for form in list(forms)}
    common = _common_passwords()
    return any(form in common for form in forms if form)


@cache
def _common_passwords() -> frozenset[str]:
    data = files(__package__).joinpath("common_passwords.txt").read_text(encoding="utf-8")
    return frozenset(line.strip().casefold() for line in data.splitlines() if line.strip() and not line.startswith("#"))
