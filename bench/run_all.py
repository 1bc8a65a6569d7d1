"""Every benchmark, one after the other, then a summary against the quality bar's targets.

    python bench/run_all.py [--quick] [--profile]      (``make bench``)

Each benchmark starts and stops its own servers. Exit status: 1 if any request or check
failed (errors must be 0); a target missed is reported, not failed (``--strict`` fails it).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
from typing import Any

from bench import conversation_fanout, sdk_verify, session_grant
from bench._common import KEYCLOAK_GRANTS_PER_VCPU, fmt_ms


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Run every benchmark and summarise.")
    p.add_argument("--quick", action="store_true", help="small counts, for a quick look")
    p.add_argument("--profile", action="store_true", help="profile the Session grant's floor (and the issuer)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    return p.parse_args(argv)


def summary_lines(grant: dict[str, Any], sdk: dict[str, Any]) -> tuple[list[str], bool]:
    """The summary table and whether every target was met."""
    ratio_ok = (grant["ratio"] >= session_grant.TARGET_RATIO
                and grant.get("cpu_ratio", 0.0) >= session_grant.TARGET_CPU_RATIO)
    crypto_ok = sdk["b"].p50_ms <= sdk_verify.TARGET_CRYPTO_P50_MS
    mark = {True: "ok", False: "MISSED"}
    lines = [
        "summary",
        f"  Session start at the token endpoint : {grant['endpoint_rps']:.1f} req/s "
        f"(p50 {fmt_ms(grant['latency'].p50_ms)}, p99 {fmt_ms(grant['latency'].p99_ms)}, errors {grant['errors']})",
        f"      floor {grant['floor_ops']:.1f} ops/s, ratio {grant['ratio']:.2f}, CPU ratio "
        f"{grant.get('cpu_ratio', 0.0):.2f} (target >= {session_grant.TARGET_RATIO} both: {mark[ratio_ok]}); "
        f"Keycloak anchor {KEYCLOAK_GRANTS_PER_VCPU}/s per vCPU",
        f"  sdk crypto per request (b)          : p50 {fmt_ms(sdk['b'].p50_ms)}, p99 {fmt_ms(sdk['b'].p99_ms)}; "
        f"{sdk['ratio_b_a']:.2f}x the bare ES256 verifies (target p50 <= {sdk_verify.TARGET_CRYPTO_P50_MS} ms: "
        f"{mark[crypto_ok]})",
        f"  sdk state check (c)-(b)             : p50 +{fmt_ms(sdk['c_minus_b_p50_ms'])}, "
        f"p99 +{fmt_ms(sdk['c_minus_b_p99_ms'])} (one introspection round trip; {sdk['state_via']})",
    ]
    return lines, ratio_ok and crypto_ok


def fanout_line(fanout: dict[str, Any]) -> str:
    """The hosted conversations' fan-out beside its same-run baseline (no target in the quality bar)."""
    f, e = fanout["fanout"], fanout["empty_round_trip"]
    return (f"  conversation reply → {fanout['agents']} long polls : p50 {fmt_ms(f.p50_ms)}, p99 {fmt_ms(f.p99_ms)}; "
            f"empty round trip p50 {fmt_ms(e.p50_ms)}, p99 {fmt_ms(e.p99_ms)} ({f.p99_ms / e.p99_ms:.1f}x at p99); "
            f"woken {fanout['woken']}/{fanout['agents']}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    common = ["--quick"] if args.quick else []
    grant = session_grant.main(common + (["--profile"] if args.profile else []))
    print()
    sdk = sdk_verify.main(common)
    print()
    fanout = conversation_fanout.main(common)
    print()
    lines, met = summary_lines(grant, sdk)
    print("\n".join([*lines, fanout_line(fanout)]))
    if grant["errors"] or sdk["errors"] or not fanout["ok"]:
        return 1
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        raise SystemExit(130) from None
