"""Test modules outside packages share pytest's flat module namespace: their basenames must
differ, or collection fails with "import file mismatch" on a clean checkout."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_basenames_are_unique_outside_packages() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            seen[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: places for name, places in seen.items() if len(places) > 1}
    assert not clashes, clashes
