"""Prefixed, sortable IDs: shape, time order, monotonic within a millisecond."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

import pytest
from frontdoor_core import ids
from frontdoor_core.ids import PREFIXES, is_id, new_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@pytest.fixture(autouse=True)
def _isolated_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own "previous ID" state, so explicit times here never leak into other tests."""
    monkeypatch.setattr(ids, "_last", [0, 0])


def _frozen_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> SimpleNamespace:
    clock = SimpleNamespace(time=lambda: seconds)
    monkeypatch.setattr(ids, "time", clock)
    return clock


def _decode(body: str) -> int:
    value = 0
    for ch in body:
        value = value * 32 + CROCKFORD.index(ch)
    return value


def _ms_of(identifier: str) -> int:
    return _decode(identifier.split("_", 1)[1]) >> 80


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
def test_every_prefix_gives_a_well_formed_id(prefix: str) -> None:
    value = new_id(prefix)
    head, _, body = value.partition("_")
    assert head == prefix
    assert len(body) == 26
    assert set(body) <= set(CROCKFORD)  # no I, L, O, U, no lowercase
    assert body[0] in "01234567"  # 48 + 80 = 128 bits in 130: the top two are zero
    assert is_id(value, prefix)
    assert not is_id(value, next(p for p in sorted(PREFIXES) if p != prefix))


def test_expected_prefixes_exist() -> None:
    assert {"ten", "adm", "key", "dom", "aud", "sgk", "req", "evt"} <= PREFIXES


@pytest.mark.parametrize("prefix", ["usr", "", "TEN", "ten_", "t", "x" * 10, "ten "])
def test_unknown_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="unknown id prefix"):
        new_id(prefix)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ten",
        "ten_",
        "ten_" + "0" * 25,
        "ten_" + "0" * 27,
        "ten_" + "0" * 25 + "I",
        "ten_" + "0" * 25 + "u",
        "ten-" + "0" * 26,
        "TEN_" + "0" * 26,
        " ten_" + "0" * 26,
        "ten_" + "0" * 26 + " ",
    ],
)
def test_is_id_refuses_malformed_text(text: str) -> None:
    assert not is_id(text, "ten")


def test_is_id_refuses_a_trailing_newline() -> None:
    assert not is_id(new_id("ten") + "\n", "ten")


def test_time_is_encoded_first() -> None:
    now = int(time.time() * 1000)
    assert _ms_of(new_id("evt", now_ms=now)) == now
    assert _ms_of(new_id("evt", now_ms=0)) == 0
    assert _ms_of(new_id("evt", now_ms=2**48 - 1)) == 2**48 - 1


def test_ids_sort_by_creation_time() -> None:
    times = [0, 1, 999, 1000, 1_700_000_000_000, 1_700_000_000_001, 2**41, 2**48 - 1]
    made = [new_id("aud", now_ms=t) for t in times]
    assert sorted(made) == made
    assert sorted(reversed(made)) == made


def test_ids_are_monotonic_within_one_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    _frozen_clock(monkeypatch, 1_750_000_000.123)
    made = [new_id("evt") for _ in range(2000)]
    assert len(set(made)) == len(made)
    assert sorted(made) == made
    assert {_ms_of(x) for x in made} == {1_750_000_000_123}


def test_ids_stay_monotonic_when_the_clock_steps_back(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _frozen_clock(monkeypatch, 1_750_000_000.5)
    first = [new_id("key") for _ in range(3)]
    clock.time = lambda: 1_750_000_000.5 - 2.0  # NTP step backwards
    later = [new_id("key") for _ in range(3)]
    assert sorted(first + later) == first + later


def test_ids_with_the_same_time_differ_randomly() -> None:
    made = {new_id("ten", now_ms=1_700_000_000_000) for _ in range(200)}
    assert len(made) == 200
    random_parts = {_decode(x.split("_", 1)[1]) & ((1 << 80) - 1) for x in made}
    assert len(random_parts) == 200
    assert max(random_parts).bit_length() > 70  # 80 random bits, not a counter


def test_shape_regex_matches_generated_ids() -> None:
    pattern = re.compile(r"^[a-z]{2,5}_[0-9A-HJKMNP-TV-Z]{26}$")
    assert all(pattern.match(new_id(p)) for p in PREFIXES)
