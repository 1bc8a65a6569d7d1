"""The overview's bar charts: 30 UTC days ending today, a rounded scale, stacked segments."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from frontdoor_console.http.charts import bar_chart, chart_days, nice_ceiling


@pytest.mark.parametrize(("n", "ceiling"), [(0, 1), (1, 1), (2, 2), (3, 3), (7, 8), (9, 10), (11, 20), (28, 30), (240, 300), (810, 1000)])
def test_nice_ceiling(n: int, ceiling: int) -> None:
    assert nice_ceiling(n) == ceiling


def test_chart_days_are_utc_days_ending_today() -> None:
    # 01:30 in UTC+3 is still the previous UTC day.
    now = datetime(2026, 12, 2, 1, 30, tzinfo=timezone(timedelta(hours=3)))
    days, since = chart_days(now)
    assert len(days) == 30 and days[-1] == date(2026, 12, 1) and days[0] == date(2026, 11, 2)
    assert since == datetime(2026, 11, 2, tzinfo=UTC)


def test_bars_stack_bottom_up_within_the_plot() -> None:
    days, _ = chart_days(datetime(2026, 12, 1, 12, tzinfo=UTC))
    chart = bar_chart("ops", "Operations proposed", "operations proposed", days, [
        ("succeeded", "succeeded", {days[-1]: 3, days[0]: 1}),
        ("failed", "failed", {days[-1]: 1}),
    ])
    assert chart.scale == 4 and chart.total == 5
    last = chart.bars[-1]
    assert last.total == 4 and last.values == (3, 1)
    ok, failed = last.segments
    assert ok.series == "succeeded" and failed.series == "failed"
    assert ok.y + ok.height == pytest.approx(chart.bottom)
    assert failed.y + failed.height == pytest.approx(ok.y)
    assert failed.y == pytest.approx(chart.bottom - 4 * (chart.bottom - chart.top) / 4)
    assert chart.bars[1].segments == ()
    assert last.label == "Dec 1: 4 operations proposed (succeeded 3, failed 1)"
    assert "busiest day was Dec 1 with 4" in chart.description
    assert all(b.x >= 0 and b.x + b.width <= chart.width for b in chart.bars)


def test_an_empty_chart_says_so() -> None:
    days, _ = chart_days(datetime(2026, 12, 1, 12, tzinfo=UTC))
    chart = bar_chart("s", "Sessions started", "Sessions started", days, [("sessions", "started", {})])
    assert chart.total == 0 and chart.scale == 1 and chart.description == "No Sessions started from Nov 2 to Dec 1."
