"""cache_lifetime: HTTP caching headers, clamped to 1 min - 24 h (GUIDE-fetch-04, PAP-3-04)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_identity import CacheBounds, cache_lifetime

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOUNDS = CacheBounds()


def lifetime(**headers: str) -> float:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return cache_lifetime(named, now=NOW, bounds=BOUNDS).total_seconds()


def test_no_caching_headers_means_the_default() -> None:
    assert lifetime() == 300
    assert lifetime(cache_control="public") == 300


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("max-age=600", 600),
        ("public, max-age=3600", 3600),
        ('MAX-AGE="900"', 900),
        ("max-age=10", 60),  # below the minimum
        ("max-age=0", 60),
        ("max-age=31536000", 86400),  # above the maximum
        ("max-age=99999999999999999999999", 86400),
        ("no-store", 60),
        ("no-cache, max-age=3600", 60),
        ("max-age=abc", 60),  # invalid: stale
        ("max-age=-5", 60),
        ("max-age=600, max-age=120", 120),  # repeated: the shorter
        ("private, s-maxage=9, max-age=700", 700),
    ],
)
def test_cache_control_max_age_within_bounds(value: str, seconds: int) -> None:
    assert lifetime(cache_control=value) == seconds


def test_age_is_subtracted() -> None:
    assert lifetime(cache_control="max-age=600", age="100") == 500
    assert lifetime(cache_control="max-age=600", age="590") == 60


def test_expires_relative_to_date_or_now() -> None:
    expires = "Mon, 30 Nov 2026 13:00:00 GMT"
    assert lifetime(expires=expires) == 3600
    assert lifetime(expires=expires, date="Mon, 30 Nov 2026 12:30:00 GMT") == 1800
    assert lifetime(expires="Mon, 30 Nov 2026 11:00:00 GMT") == 60
    assert lifetime(expires="0") == 60  # invalid Expires: already expired
    assert lifetime(expires="Fri, 30 Nov 2029 12:00:00 GMT") == 86400


def test_max_age_wins_over_expires() -> None:
    assert lifetime(cache_control="max-age=120", expires="Mon, 30 Nov 2026 13:00:00 GMT") == 120


def test_bounds_are_configurable_and_checked() -> None:
    bounds = CacheBounds(minimum=10, default=20, maximum=30)
    assert cache_lifetime({}, now=NOW, bounds=bounds) == timedelta(seconds=20)
    assert cache_lifetime({"cache-control": "max-age=1"}, now=NOW, bounds=bounds) == timedelta(seconds=10)
    with pytest.raises(ValueError):
        CacheBounds(minimum=100, default=50)
    with pytest.raises(ValueError):
        CacheBounds(failure=0)
