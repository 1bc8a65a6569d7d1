"""Tenant slug rules."""

from __future__ import annotations

import pytest
from frontdoor_tenancy.credentials import (
    MAX_SLUG_LENGTH,
    MIN_SLUG_LENGTH,
    RESERVED_SLUGS,
    InvalidSlug,
    validate_slug,
)


@pytest.mark.parametrize("slug", ["acme", "abc", "a1-b2", "acme-corp-eu", "123", "x" * 40, "frontdoorx"])
def test_valid_slugs_are_returned_unchanged(slug: str) -> None:
    assert validate_slug(slug) == slug


@pytest.mark.parametrize(
    ("slug", "code"),
    [
        ("", "too_short"),
        ("ab", "too_short"),
        ("x" * 41, "too_long"),
        ("Acme", "invalid_characters"),
        ("acme_corp", "invalid_characters"),
        ("acme.corp", "invalid_characters"),
        ("acme corp", "invalid_characters"),
        ("acme\n", "invalid_characters"),
        ("acmé", "invalid_characters"),
        ("\u212aelvin", "invalid_characters"),  # Kelvin sign lowercases to ASCII "k"
        ("acme/x", "invalid_characters"),
        ("%2e%2e", "invalid_characters"),
        ("-acme", "hyphen_at_edge"),
        ("acme-", "hyphen_at_edge"),
        ("ac--me", "consecutive_hyphens"),
        ("xn--bcher-kva", "consecutive_hyphens"),
        ("admin", "reserved"),
        ("well-known", "reserved"),
        ("jwks", "reserved"),
        ("healthz", "reserved"),
        ("frontdoor", "reserved"),
        ("frontdoor-eu", "reserved"),
        ("poppy-support", "reserved"),
        ("null", "reserved"),
    ],
)
def test_refused_slugs(slug: str, code: str) -> None:
    with pytest.raises(InvalidSlug) as caught:
        validate_slug(slug)
    assert caught.value.code == code
    assert caught.value.message
    assert str(caught.value) == caught.value.message


def test_length_bounds() -> None:
    assert MIN_SLUG_LENGTH == 3
    assert MAX_SLUG_LENGTH == 40


@pytest.mark.parametrize(
    "word",
    [
        "api", "www", "well-known", "oauth", "login", "static", "assets", "healthz", "readyz",
        "jwks", "console", "dashboard", "docs", "status", "support", "help", "frontdoor",
        "poppy", "auth", "issuer", "system", "root", "null", "undefined",
    ],
)  # fmt: skip
def test_required_reserved_words(word: str) -> None:
    assert word in RESERVED_SLUGS


@pytest.mark.parametrize("word", sorted(RESERVED_SLUGS))
def test_every_reserved_word_is_refused_as_reserved(word: str) -> None:
    # Each entry must otherwise be a valid slug, or the list holds dead entries.
    with pytest.raises(InvalidSlug) as caught:
        validate_slug(word)
    assert caught.value.code == "reserved"
