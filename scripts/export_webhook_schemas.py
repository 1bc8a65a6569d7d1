#!/usr/bin/env python3
"""Write the JSON Schema of every webhook event's message to ``docs/webhooks/schemas/``.

    .venv/bin/python scripts/export_webhook_schemas.py            # (re)write the files
    .venv/bin/python scripts/export_webhook_schemas.py --check    # exit 1 if any file is stale

One file per event type, ``<type>.v<version>.json``, generated from the msgspec structs
of ``frontdoor_webhooks.event_payloads`` (the same structs the code builds payloads
with), plus ``index.json`` listing them. A unit test runs ``--check``, and so does
``make check``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "docs" / "webhooks" / "schemas"


def render(value: Any) -> str:
    """Stable text: two-space indent, UTF-8 kept readable, trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def build() -> dict[str, str]:
    """File name -> content, for every event type with a documented payload."""
    from frontdoor_webhooks import EVENT_TYPES, PAYLOAD_VERSION, PAYLOADS, TEST_EVENT, message_schema

    files: dict[str, str] = {}
    index = []
    for event_type in PAYLOADS:
        name = f"{event_type}.v{PAYLOAD_VERSION}.json"
        files[name] = render(message_schema(event_type))
        index.append({"type": event_type, "version": PAYLOAD_VERSION, "schema": name,
                      "subscribable": event_type in EVENT_TYPES and event_type != TEST_EVENT})
    files["index.json"] = render({"events": index})
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=str(DEFAULT_DIR),
                        help=f"folder to write (default: {DEFAULT_DIR.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a file differs from what the code produces")
    args = parser.parse_args(argv)
    out = Path(args.dir)
    files = build()
    if args.check:
        present = {p.name for p in out.glob("*.json")} if out.is_dir() else set()
        stale = sorted(name for name, text in files.items()
                       if not (out / name).is_file() or (out / name).read_text("utf-8") != text)
        extra = sorted(present - set(files))
        if stale or extra:
            print(f"{out} is stale ({', '.join(stale + extra)}): run scripts/export_webhook_schemas.py",
                  file=sys.stderr)
            return 1
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for stale_file in set(p.name for p in out.glob("*.json")) - set(files):
        (out / stale_file).unlink()
    for name, text in files.items():
        (out / name).write_text(text, "utf-8")
    print(f"wrote {len(files)} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
