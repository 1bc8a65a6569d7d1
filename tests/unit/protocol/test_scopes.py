"""Scopes (RFC 6749 §3.3, PAP-4.4-03)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import (
    BUILT_IN_SCOPES,
    POPPY_READ,
    POPPY_WRITE,
    custom_scope_problem,
    format_scope,
    is_scope_token,
    parse_scope,
)


def test_built_in_scopes_are_described() -> None:
    """The protocol's two scopes exist with a description for consent pages."""
    assert set(BUILT_IN_SCOPES) == {POPPY_READ, POPPY_WRITE} == {"poppy:read", "poppy:write"}
    assert all(description.strip() for description in BUILT_IN_SCOPES.values())


@pytest.mark.parametrize("token", ["poppy:read", "addresses", "orders:write", "a!#$%&'()*+,-./:;<=>?@[]^_`{|}~"])
def test_rfc6749_3_3_valid_scope_tokens(token: str) -> None:
    """RFC 6749 §3.3: visible ASCII except '"' and '\\'."""
    assert is_scope_token(token)


@pytest.mark.parametrize("token", ["", "two words", 'quo"te', "back\\slash", "caf\u00e9", "tab\t", None, 3])
def test_rfc6749_3_3_invalid_scope_tokens(token: object) -> None:
    """RFC 6749 §3.3: empty, spaced, quoted, non-ASCII and non-string values are not scope-tokens."""
    assert not is_scope_token(token)


def test_pap_4_4_03_scope_is_space_separated() -> None:
    """PAP-4.4-03: scope is a space-separated string; repeats collapse, order is kept."""
    assert parse_scope("poppy:read poppy:write poppy:read") == ("poppy:read", "poppy:write")
    for bad in ("", " poppy:read", "poppy:read  poppy:write", "poppy:read\tpoppy:write"):
        with pytest.raises(ValueError):
            parse_scope(bad)


def test_format_scope_round_trips() -> None:
    """Formatting then parsing gives the same scopes."""
    assert parse_scope(format_scope(["a", "b", "a"])) == ("a", "b")
    with pytest.raises(ValueError):
        format_scope(["ok", "not ok"])


def test_custom_scope_rules() -> None:
    """Custom scopes are scope-tokens outside the protocol's poppy: namespace, with a description."""
    assert custom_scope_problem("addresses", "Manage saved addresses") is None
    assert custom_scope_problem("poppy:admin", "Everything") == "reserved"
    assert custom_scope_problem("two words", "x") == "syntax"
    assert custom_scope_problem("x" * 129, "x") == "too_long"
    assert custom_scope_problem("addresses", "  ") == "no_description"
