"""The Session retention predicates and setting (ADR 0007)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_sessions.session_retention import renewable, session_expired

NOW = datetime(2027, 6, 1, 12, tzinfo=UTC)
R = timedelta(days=90)


def test_a_session_expires_after_its_last_activity_plus_retention() -> None:
    assert session_expired(last_used_at=NOW - R - timedelta(seconds=1), ended_at=None, now=NOW, retention=R)
    assert not session_expired(last_used_at=NOW - R + timedelta(seconds=1), ended_at=None, now=NOW, retention=R)
    ended_old = NOW - R - timedelta(days=1)
    assert session_expired(last_used_at=ended_old - timedelta(days=5), ended_at=ended_old, now=NOW, retention=R)
    # ended long ago but used since (a renewal raced the end): its last activity is the use
    assert not session_expired(last_used_at=NOW - timedelta(days=1), ended_at=ended_old, now=NOW, retention=R)
    assert not session_expired(last_used_at=NOW - 10 * R, ended_at=None, now=NOW, retention=timedelta(0))


def test_renewal_needs_a_live_session_used_within_the_idle_lifetime() -> None:
    assert renewable(last_used_at=NOW - R, ended_at=None, now=NOW, idle_lifetime=R)
    assert not renewable(last_used_at=NOW - R - timedelta(seconds=1), ended_at=None, now=NOW, idle_lifetime=R)
    assert not renewable(last_used_at=NOW, ended_at=NOW, now=NOW, idle_lifetime=R)
    assert renewable(last_used_at=NOW - 10 * R, ended_at=None, now=NOW, idle_lifetime=timedelta(0))


def test_the_setting_defaults_to_90_days() -> None:
    assert load_settings({}).session_retention == timedelta(days=90)
    assert load_settings({"FRONTDOOR_SESSION_RETENTION": "120d"}).session_retention == timedelta(days=120)
    assert load_settings({"FRONTDOOR_SESSION_RETENTION": "0s"}).session_retention == timedelta(0)
    with pytest.raises(SettingsError, match="FRONTDOOR_SESSION_RETENTION"):
        load_settings({"FRONTDOOR_SESSION_RETENTION": "-1d"})
