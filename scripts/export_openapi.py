#!/usr/bin/env python3
"""Write the management API's OpenAPI document to ``docs/api/openapi-console.json``.

    .venv/bin/python scripts/export_openapi.py            # (re)write the file
    .venv/bin/python scripts/export_openapi.py --check    # exit 1 if the file is stale
    .venv/bin/python scripts/export_openapi.py --output -  # print to stdout

The console app is built with placeholder settings and never started: the schema comes
from the route handlers alone, so no database, Redis or real key is needed, and the
output does not depend on the caller's environment. The result is the document a
running console serves at ``/api/v1/openapi.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "docs" / "api" / "openapi-console.json"

# Never used to encrypt anything: the app is only built, not started.
_PLACEHOLDER_ENV = {"FRONTDOOR_ENV": "dev", "FRONTDOOR_KEK": "placeholder-not-a-key"}


def build_schema() -> dict[str, Any]:
    """The console's OpenAPI document as plain JSON values."""
    from frontdoor_console.app import create_app
    from frontdoor_core.settings import load_settings

    app = create_app(load_settings(_PLACEHOLDER_ENV))
    schema: dict[str, Any] = app.openapi_schema.to_schema()
    return schema


def render(schema: dict[str, Any]) -> str:
    """Stable text: two-space indent, UTF-8 kept readable, trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT),
                        help=f"file to write, or '-' for stdout (default: {DEFAULT_OUTPUT.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the file differs from what the code produces")
    args = parser.parse_args(argv)

    text = render(build_schema())
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    if args.check:
        current = out.read_text("utf-8") if out.is_file() else None
        if current != text:
            print(f"{out} is stale: run scripts/export_openapi.py", file=sys.stderr)
            return 1
        print(f"{out} is up to date")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, "utf-8")
    print(f"wrote {out} ({len(text)} bytes, {len(json.loads(text).get('paths', {}))} paths)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
