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


def test_top_level_test_packages_do_not_share_a_name() -> None:
    """A test folder with an ``__init__.py`` under a folder without one is imported by its own name:
    two such folders of the same name (``unit/tenancy`` and ``integration/tenancy``) clash on a clean
    checkout ("No module named tenancy.test_...")."""
    seen: dict[str, list[str]] = defaultdict(list)
    for init in TESTS.rglob("__init__.py"):
        package = init.parent
        if package != TESTS and not (package.parent / "__init__.py").exists():
            seen[package.name].append(str(package.relative_to(TESTS)))
    clashes = {name: places for name, places in seen.items() if len(places) > 1}
    assert not clashes, clashes
