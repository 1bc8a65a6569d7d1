#!/usr/bin/env python3
"""Write the OpenAPI documents of the console, the ledger and the issuer to ``docs/api/``.

    .venv/bin/python scripts/export_openapi.py                     # (re)write all three
    .venv/bin/python scripts/export_openapi.py --check             # exit 1 if any file is stale
    .venv/bin/python scripts/export_openapi.py ledger --output -   # print one to stdout

- ``openapi-console.json``: the management API (served at ``{console}/api/v1/openapi.json``);
- ``openapi-ledger.json``: the agents' operations and conversations endpoints and the
  company's ledger API (``{ledger}/openapi.json``);
- ``openapi-issuer.json``: the issuer's company-facing routes (``{issuer}/openapi.json``).

Each app is built with placeholder settings and never started: the documents come from
the route handlers alone, so no database, Redis or real key is needed, and the output does
not depend on the caller's environment. ``make check`` and a unit test run ``--check``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "api"

# Never used to encrypt anything: the apps are only built, not started.
_PLACEHOLDER_ENV = {"FRONTDOOR_ENV": "dev", "FRONTDOOR_KEK": "placeholder-not-a-key"}


def _settings() -> Any:
    from frontdoor_core.settings import load_settings

    return load_settings(_PLACEHOLDER_ENV)


def console_schema() -> dict[str, Any]:
    """The management API's document (Litestar's, as the console serves it)."""
    from frontdoor_console.app import create_app

    schema: dict[str, Any] = create_app(_settings()).openapi_schema.to_schema()
    return schema


def ledger_schema() -> dict[str, Any]:
    """The ledger's document, with the request bodies its handlers decode."""
    from frontdoor_httpkit import openapi_document
    from frontdoor_ledger.app import create_app

    return openapi_document(create_app(_settings()))


def issuer_schema() -> dict[str, Any]:
    """The issuer's document (its company-facing routes)."""
    from frontdoor_issuer.openapi import issuer_document

    return issuer_document()


DOCUMENTS: dict[str, tuple[Callable[[], dict[str, Any]], Path]] = {
    "console": (console_schema, DOCS / "openapi-console.json"),
    "ledger": (ledger_schema, DOCS / "openapi-ledger.json"),
    "issuer": (issuer_schema, DOCS / "openapi-issuer.json"),
}


def render(schema: dict[str, Any]) -> str:
    """Stable text: two-space indent, UTF-8 kept readable, trailing newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", choices=[[], *DOCUMENTS], default=[],
                        help="which documents (default: all)")
    parser.add_argument("--output", help="with one app: the file to write, or '-' for stdout")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a file differs from what the code produces")
    args = parser.parse_args(argv)
    names = args.apps or list(DOCUMENTS)
    if args.output and len(names) != 1:
        parser.error("--output needs exactly one app")

    stale = 0
    for name in names:
        build, path = DOCUMENTS[name]
        text = render(build())
        if args.output == "-":
            sys.stdout.write(text)
            continue
        out = Path(args.output) if args.output else path
        if args.check:
            current = out.read_text("utf-8") if out.is_file() else None
            if current != text:
                print(f"{out} is stale: run scripts/export_openapi.py", file=sys.stderr)
                stale += 1
            else:
                print(f"{out} is up to date")
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, "utf-8")
        print(f"wrote {out} ({len(text)} bytes, {len(json.loads(text).get('paths', {}))} paths)")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
