"""Content-Type matching for JSON responses."""

from __future__ import annotations

import pytest
from frontdoor_core.outbound import media_type_matches

JSON = ("application/json", "application/*+json")


@pytest.mark.parametrize(
    "value",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/jwk-set+json",
        "application/problem+json ; charset=UTF-8",
    ],
)
def test_json_types_are_accepted(value: str) -> None:
    assert media_type_matches(value, JSON)


@pytest.mark.parametrize(
    "value",
    [
        "text/html",
        "text/json",
        "application/jsonp",
        "application/+json",
        "application/json-seq",
        "application/json, text/html",
        "application",
        "",
        "text/plain+json",
    ],
)
def test_other_types_are_refused(value: str) -> None:
    assert not media_type_matches(value, JSON)
