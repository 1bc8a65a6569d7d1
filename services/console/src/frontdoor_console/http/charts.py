"""Small bar charts of daily counts, laid out here and drawn as inline SVG by ``_chart.html``.

No script and no style attribute (the CSP allows neither): the geometry is SVG attributes
and the colours come from the stylesheet's ``series-*`` classes. Each chart carries a
``<title>`` and a ``<desc>`` and is followed by a visually hidden table of its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["DAYS", "Bar", "Chart", "Segment", "bar_chart", "chart_days", "nice_ceiling"]

DAYS = 30
WIDTH = 300  # the plot; labels of the scale sit to its right
HEIGHT = 120
_TOP, _BOTTOM = 8.0, 102.0
_SLOT = WIDTH / DAYS
_GAP = 2.0


@dataclass(frozen=True)
class Segment:
    series: str
    value: int
    y: float
    height: float


@dataclass(frozen=True)
class Bar:
    day: date
    x: float
    width: float
    total: int
    values: tuple[int, ...]
    segments: tuple[Segment, ...]
    label: str


@dataclass(frozen=True)
class Chart:
    """One chart: its bars (oldest day first), the scale and what it says in words."""

    id: str
    title: str
    unit: str
    series: tuple[tuple[str, str], ...]  # (class suffix, label), bottom of the stack first
    bars: tuple[Bar, ...]
    scale: int
    total: int
    description: str
    width: int = WIDTH
    height: int = HEIGHT
    top: float = _TOP
    bottom: float = _BOTTOM

    @property
    def first_day(self) -> date:
        return self.bars[0].day

    @property
    def last_day(self) -> date:
        return self.bars[-1].day

    @property
    def mid(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def half(self) -> str:
        """The scale's middle line's label ("2.5" for 5)."""
        return f"{self.scale / 2:g}"


def chart_days(now: datetime, days: int = DAYS) -> tuple[list[date], datetime]:
    """The last ``days`` UTC days, today included, and the UTC midnight the first one starts at."""
    today = now.astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    return [first + timedelta(days=i) for i in range(days)], datetime.combine(first, time(), tzinfo=UTC)


def nice_ceiling(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, ... at least ``n`` (and at least 1)."""
    step = 1
    while True:
        for m in (1, 2, 3, 4, 5, 6, 8):
            if step * m >= n:
                return step * m
        step *= 10


def _day(d: date) -> str:
    return f"{d:%b} {d.day}"


def bar_chart(chart_id: str, title: str, unit: str, days: Sequence[date],
              series: Sequence[tuple[str, str, Mapping[date, int]]]) -> Chart:
    """Stack ``series`` (class suffix, label, count per day; missing days count 0) for each of ``days``."""
    values = [tuple(int(counts.get(d, 0)) for _, _, counts in series) for d in days]
    totals = [sum(v) for v in values]
    scale = nice_ceiling(max(totals, default=0))
    per_unit = (_BOTTOM - _TOP) / scale
    bars = []
    for i, (d, vals) in enumerate(zip(days, values, strict=True)):
        y = _BOTTOM
        segments = []
        for (key, _, _), v in zip(series, vals, strict=True):
            if v:
                h = round(v * per_unit, 2)
                y = round(y - h, 2)
                segments.append(Segment(series=key, value=v, y=y, height=h))
        parts = ", ".join(f"{label} {v}" for (_, label, _), v in zip(series, vals, strict=True))
        label = f"{_day(d)}: {sum(vals)} {unit}" + (f" ({parts})" if len(series) > 1 else "")
        bars.append(Bar(day=d, x=round(i * _SLOT + _GAP / 2, 2), width=round(_SLOT - _GAP, 2), total=sum(vals),
                        values=vals, segments=tuple(segments), label=label))
    total = sum(totals)
    if total:
        peak = max(range(len(days)), key=lambda i: (totals[i], i))
        description = (f"{total} {unit} from {_day(days[0])} to {_day(days[-1])} (UTC days); "
                       f"the busiest day was {_day(days[peak])} with {totals[peak]}.")
    else:
        description = f"No {unit} from {_day(days[0])} to {_day(days[-1])}."
    return Chart(id=chart_id, title=title, unit=unit, series=tuple((k, label) for k, label, _ in series),
                 bars=tuple(bars), scale=scale, total=total, description=description)
