"""Every spelling of one admin email finds one row and one login bucket."""

from __future__ import annotations

import pytest
from frontdoor_tenancy.email_address import email_key, normalize_email

SPELLINGS = [
    "admin@demo.example",
    "Admin@Demo.Example",
    "  admin@demo.example\t",
    "admin@demo.example.",
    "admin@demo.example...",
    "ａｄｍｉｎ@ｄｅｍｏ．ｅｘａｍｐｌｅ",
    "admin＠demo.example",
    "admin@demo。example",
    "ADMIN@DEMO.EXAMPLE.",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_spellings_normalise_to_one_address(spelling: str) -> None:
    assert normalize_email(spelling) == "admin@demo.example"
    assert email_key(spelling) == "admin@demo.example"


def test_the_domain_is_idna() -> None:
    assert normalize_email("a@Bücher.Example") == normalize_email("a@xn--bcher-kva.example") == "a@xn--bcher-kva.example"


def test_malformed_input_still_shares_a_bucket_per_string() -> None:
    with pytest.raises(ValueError):
        normalize_email("not an email")
    assert email_key("NOT AN EMAIL.") == email_key(" not an email ") == "not an email"
    assert email_key("ｎｏｔ ａｎ ｅｍａｉｌ") == "not an email"
