"""Signing key rotation policy on a fixed timeline."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_tenancy.credentials import (
    DEFAULT_PUBLISH_LEAD,
    NoSigningKey,
    Rotation,
    SigningKeyRecord,
    current_signing_key,
    published_keys,
    removable_keys,
    rotate,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(days=30)
LEAD = timedelta(minutes=10)
RETAIN = timedelta(hours=1)
SECOND = timedelta(seconds=1)


def apply(records: Sequence[SigningKeyRecord], rotation: Rotation) -> list[SigningKeyRecord]:
    """What the repository does with a rotation plan."""
    updated = {record.kid: record for record in rotation.retired}
    return [updated.get(record.kid, record) for record in records] + [rotation.new_key]


def kids(records: Sequence[SigningKeyRecord]) -> list[str]:
    return [record.kid for record in records]


@pytest.fixture
def first() -> list[SigningKeyRecord]:
    return apply([], rotate([], T0, "k1", LEAD))


def test_first_key_signs_at_once(first: list[SigningKeyRecord]) -> None:
    assert first == [SigningKeyRecord(kid="k1", created_at=T0, activates_at=T0)]
    assert current_signing_key(first, T0).kid == "k1"
    assert kids(published_keys(first, T0, RETAIN)) == ["k1"]


def test_nothing_signs_before_the_first_key(first: list[SigningKeyRecord]) -> None:
    with pytest.raises(NoSigningKey):
        current_signing_key(first, T0 - SECOND)
    assert published_keys(first, T0 - SECOND, RETAIN) == []
    with pytest.raises(NoSigningKey):
        current_signing_key([], T0)


def test_rotation_timeline(first: list[SigningKeyRecord]) -> None:
    rotation = rotate(first, T1, "k2", LEAD)
    assert rotation.new_key == SigningKeyRecord(kid="k2", created_at=T1, activates_at=T1 + LEAD)
    assert rotation.retired == (SigningKeyRecord(kid="k1", created_at=T0, activates_at=T0, retired_at=T1 + LEAD),)
    records = apply(first, rotation)

    # Published at once, old key still signs during the lead.
    assert kids(published_keys(records, T1, RETAIN)) == ["k2", "k1"]
    assert current_signing_key(records, T1).kid == "k1"
    assert current_signing_key(records, T1 + LEAD - SECOND).kid == "k1"

    # The new key takes over exactly at activation.
    assert current_signing_key(records, T1 + LEAD).kid == "k2"
    assert current_signing_key(records, T1 + timedelta(days=365)).kid == "k2"

    # The old key stays published for retain_for after retirement, then leaves.
    assert kids(published_keys(records, T1 + LEAD + RETAIN - SECOND, RETAIN)) == ["k2", "k1"]
    assert removable_keys(records, T1 + LEAD + RETAIN - SECOND, RETAIN) == []
    assert kids(published_keys(records, T1 + LEAD + RETAIN, RETAIN)) == ["k2"]
    assert kids(removable_keys(records, T1 + LEAD + RETAIN, RETAIN)) == ["k1"]


def test_default_publish_lead_is_used(first: list[SigningKeyRecord]) -> None:
    rotation = rotate(first, T1, "k2")
    assert rotation.new_key.activates_at == T1 + DEFAULT_PUBLISH_LEAD
    assert timedelta(minutes=10) == DEFAULT_PUBLISH_LEAD


def test_published_keys_newest_first_over_several_rotations(first: list[SigningKeyRecord]) -> None:
    records = first
    for day, kid in enumerate(["k2", "k3", "k4"], start=1):
        records = apply(records, rotate(records, T0 + timedelta(days=day), kid, LEAD))
    now = T0 + timedelta(days=3, minutes=30)
    assert current_signing_key(records, now).kid == "k4"
    assert kids(published_keys(records, now, RETAIN)) == ["k4", "k3"]
    assert kids(published_keys(records, now, timedelta(days=30))) == ["k4", "k3", "k2", "k1"]
    assert kids(removable_keys(records, now, RETAIN)) == ["k1", "k2"]


def test_rotating_during_the_lead_supersedes_the_pending_key(first: list[SigningKeyRecord]) -> None:
    records = apply(first, rotate(first, T1, "k2", LEAD))
    again = T1 + timedelta(minutes=5)
    rotation = rotate(records, again, "k3", LEAD)
    retired = {record.kid: record.retired_at for record in rotation.retired}
    # k1 keeps signing until k3 activates; k2 never signs.
    assert retired == {"k1": again + LEAD, "k2": again}
    records = apply(records, rotation)
    assert current_signing_key(records, T1 + LEAD).kid == "k1"
    assert current_signing_key(records, again + LEAD - SECOND).kid == "k1"
    assert current_signing_key(records, again + LEAD).kid == "k3"
    for minute in range(0, 60):
        assert current_signing_key(records, T1 + timedelta(minutes=minute)).kid != "k2"


def test_emergency_rotation_with_no_lead_switches_now(first: list[SigningKeyRecord]) -> None:
    rotation = rotate(first, T1, "k2", timedelta(0))
    assert rotation.new_key.activates_at == T1
    assert [record.retired_at for record in rotation.retired] == [T1]
    records = apply(first, rotation)
    assert current_signing_key(records, T1).kid == "k2"
    assert current_signing_key(records, T1 - SECOND).kid == "k1"
    assert kids(published_keys(records, T1, RETAIN)) == ["k2", "k1"]


def test_new_key_activates_at_once_when_nothing_signs() -> None:
    retired = [SigningKeyRecord(kid="old", created_at=T0, activates_at=T0, retired_at=T0 + SECOND)]
    rotation = rotate(retired, T1, "k2", LEAD)
    assert rotation.new_key.activates_at == T1
    assert rotation.retired == ()


def test_already_retired_keys_are_left_alone(first: list[SigningKeyRecord]) -> None:
    records = apply(first, rotate(first, T1, "k2", LEAD))
    later = T1 + timedelta(days=1)
    rotation = rotate(records, later, "k3", LEAD)
    assert kids(rotation.retired) == ["k2"]


def test_published_keys_exclude_keys_created_later(first: list[SigningKeyRecord]) -> None:
    records = apply(first, rotate(first, T1, "k2", LEAD))
    assert kids(published_keys(records, T1 - SECOND, RETAIN)) == ["k1"]


def test_rotation_is_pure(first: list[SigningKeyRecord]) -> None:
    before = list(first)
    rotate(first, T1, "k2", LEAD)
    assert first == before


def test_refuses_a_duplicate_kid(first: list[SigningKeyRecord]) -> None:
    with pytest.raises(ValueError, match="already"):
        rotate(first, T1, "k1", LEAD)


def test_refuses_naive_datetimes(first: list[SigningKeyRecord]) -> None:
    naive = datetime(2025, 2, 1)
    with pytest.raises(ValueError, match="timezone"):
        rotate(first, naive, "k2", LEAD)
    with pytest.raises(ValueError, match="timezone"):
        current_signing_key(first, naive)
    with pytest.raises(ValueError, match="timezone"):
        published_keys(first, naive, RETAIN)


def test_refuses_negative_durations(first: list[SigningKeyRecord]) -> None:
    with pytest.raises(ValueError, match="publish_lead"):
        rotate(first, T1, "k2", -SECOND)
    with pytest.raises(ValueError, match="retain_for"):
        published_keys(first, T1, -SECOND)
    with pytest.raises(ValueError, match="retain_for"):
        removable_keys(first, T1, -SECOND)
