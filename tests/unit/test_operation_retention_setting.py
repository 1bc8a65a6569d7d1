"""FRONTDOOR_OPERATION_RETENTION (ADR 0007 addendum): its default, a duration, 0s to keep everything."""

from __future__ import annotations

from datetime import timedelta

import pytest
from frontdoor_core.settings import SettingsError, load_settings


def test_the_operation_retention_setting() -> None:
    assert load_settings({}).operation_retention == timedelta(days=400)
    assert load_settings({"FRONTDOOR_OPERATION_RETENTION": "180d"}).operation_retention == timedelta(days=180)
    assert load_settings({"FRONTDOOR_OPERATION_RETENTION": "0s"}).operation_retention == timedelta(0)
    with pytest.raises(SettingsError, match="FRONTDOOR_OPERATION_RETENTION"):
        load_settings({"FRONTDOOR_OPERATION_RETENTION": "a year"})


def test_the_prune_is_on_the_beat_schedule() -> None:
    from frontdoor_dispatcher.celery_app import app
    from frontdoor_dispatcher.tasks import retention

    schedule = app.conf.beat_schedule["retention-operations"]
    assert schedule["task"] == "frontdoor.retention.operations" and schedule["schedule"] == 3600.0
    assert retention.operations.name in app.tasks and app.tasks[retention.operations.name].run is not None
