"""bench/scale.py parses its sizes and reports its ratios (no servers started)."""

from __future__ import annotations

from bench import scale
from bench._common import summarize


def test_sizes_and_overrides() -> None:
    assert scale.parse_args([]).full is False
    assert scale.SIZES["full"] == {"tenants": 10_000, "sessions": 1_000_000, "operations": 1_000_000,
                                   "attempts": 10_000_000}
    args = scale.parse_args(["--quick", "--tenants", "7", "--explain"])
    assert args.quick and args.tenants == 7 and args.explain


def test_report_prints_the_ratio_and_flags_a_miss() -> None:
    base = {"Session grant": (summarize([0.010] * 5), 3.0, 0), "confirm (SQL)": (summarize([0.002] * 5), None, 0)}
    large = {"Session grant": (summarize([0.011] * 5), 3.1, 0), "confirm (SQL)": (summarize([0.003] * 5), None, 1)}
    lines, met, errors = scale.report(base, large, {"tenants": 10_000})
    assert not met and errors == 1
    grant, confirm = lines[1], lines[2]
    assert "1.10x" in grant and grant.endswith("ok") and "3.00 -> 3.10 ms" in grant
    assert "1.50x" in confirm and confirm.endswith("ABOVE 1.2")
    assert "10,000 tenants" in lines[0]
