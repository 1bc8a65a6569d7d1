"""Read-only access to the example documents shipped with the peer SDK.

The package is located without being imported (product code never imports it; tests only
read its JSON files as inputs).
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Any

from frontdoor_protocol import loads


@cache
def fixtures_dir() -> Path:
    spec = importlib.util.find_spec("personal_agent_protocol")
    assert spec is not None and spec.submodule_search_locations, "personal-agent-protocol is a test dependency"
    path = Path(next(iter(spec.submodule_search_locations))) / "protocol" / "fixtures"
    assert path.is_dir(), path
    return path


def load_fixture(name: str) -> Any:
    """One example document, decoded with the strict decoder under test."""
    return loads((fixtures_dir() / name).read_bytes())


def conformance_cases(suite: str, check: str) -> list[dict[str, Any]]:
    """The peer suite's data-only cases of one kind, e.g. ``("protocol", "discovery")``."""
    document = load_fixture(f"conformance/{suite}.json")
    cases = [case for case in document["cases"] if case.get("check") == check]
    assert cases, f"no {check} cases in {suite}"
    return cases
