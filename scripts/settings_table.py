#!/usr/bin/env python3
"""Rewrite the README's configuration table from the settings' field descriptions.

    python scripts/settings_table.py          # update README.md in place
    python scripts/settings_table.py --check  # exit 1 if README.md is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from frontdoor_core.settings import settings_table

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- settings-table:start -->", "<!-- settings-table:end -->"


def render(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{settings_table()}\n{END}{tail}"


def main() -> int:
    text = README.read_text()
    new = render(text)
    if "--check" in sys.argv:
        if new != text:
            print("README.md's configuration table is stale: run python scripts/settings_table.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
