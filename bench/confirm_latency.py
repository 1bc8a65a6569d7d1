"""Confirm → the company's perform webhook received: latency at a steady rate, beside an empty
HTTP round trip measured in the same run.

Stack: embedded PostgreSQL and Redis, the issuer under granian (one worker) and the ledger
under granian (``--workers``, default what ``make run`` starts: ``FRONTDOOR_LEDGER_WORKERS``,
0 = one per CPU; printed), a company receiver on loopback in its own process
(``bench/_receiver.py``: raw asyncio HTTP/1.1, checks each signature) answering
``{"outcome": "succeeded"}``. Operations are proposed through the ledger API before the
timed window, each for its own signed-out Session (no scopes needed). Then confirms are
sent at ``--rate`` per second (DPoP-signed beforehand): first ``--warmup`` of them, reported
apart (a fresh ledger's first half second: at 200/s that burst alone was the p99), then, once
each of those is answered, the ``--operations`` of the timed window at the same rate; for each, the latency is the time from sending the
confirm to the receiver reading the perform webhook for that operation.

Baseline: the same HTTP client POSTing an empty body to the same receiver (one round trip).
Quality bar: p50 ≤ 5 ms and p99 ≤ 20 ms at 200 confirms/s, and the fast path's outcome in
the confirm's own answer (``succeeded``, not ``in_progress``) for ≥ 99 % of them.

    python bench/confirm_latency.py [--operations 1000] [--rate 200] [--warmup 200] [--workers N]
                                    [--timeline FILE] [--profile]

``--profile`` samples the ledger's processes with py-spy (``$PY_SPY`` or on ``PATH``) during
the timed window and prints where its samples went (``BENCH_KEEP_PROFILE=file`` keeps the
raw collapsed stacks).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from typing import Any

from bench._common import (
    FORM_HEADERS,
    Agent,
    CpuMeter,
    Stack,
    find_py_spy,
    free_port,
    install_signal_handlers,
    py_spy_record,
    stop_process_group,
    summarize,
    summarize_collapsed,
)
from bench._loopback_client import LoopbackClient
from bench._receiver import ReceiverProcess as Receiver

TARGET_P50_MS = 5.0
TARGET_P99_MS = 20.0
TARGET_ANSWERED_SHARE = 0.99
"""Share of confirms whose answer carries the outcome (the fast path finished within the wait)."""


class OperationsAgent(Agent):
    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "extensions": {"operations": {"version": "1"}}}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--operations", type=int, default=1000)
    p.add_argument("--rate", type=float, default=200.0, help="confirms per second")
    p.add_argument("--warmup", type=int, default=200,
                   help="confirms sent at the rate before the timed window, reported apart (default 200)")
    p.add_argument("--workers", type=int, default=None,
                   help="the ledger's granian workers (default: what `make run` starts, FRONTDOOR_LEDGER_WORKERS, "
                        "0 = one per CPU)")
    p.add_argument("--timeline", metavar="FILE",
                   help="write one JSON line per confirm (scheduled, sent, answered, webhook received: seconds "
                        "from the first confirm; warm-up ones marked) to see where the slow ones fall")
    p.add_argument("--profile", action="store_true",
                   help="sample the ledger with py-spy during the timed window ($PY_SPY or PATH)")
    args = p.parse_args(argv)
    if args.warmup < 0 or args.operations < 1 or args.rate <= 0:
        p.error("--operations >= 1, --warmup >= 0, --rate > 0")
    if args.workers is None:
        args.workers = make_run_workers(os.environ)
    return args


def make_run_workers(environ: dict[str, str] | os._Environ[str]) -> int:
    """The ledger's workers as ``make run`` starts them: FRONTDOOR_LEDGER_WORKERS, 0 = one per CPU."""
    from frontdoor_core.settings import ENV_NAMES

    raw = environ.get(ENV_NAMES["ledger_workers"], "0").strip() or "0"
    configured = int(raw)
    try:
        from frontdoor_ledger.serve import worker_count
    except ImportError:  # a ledger from before the launcher (an A/B run): granian's one per CPU
        return configured if configured > 0 else (len(os.sched_getaffinity(0)) or 1)
    return worker_count(configured)


def start_ledger(stack: Stack, ledger_url: str, workers: int = 1) -> subprocess.Popen[bytes]:
    port = int(ledger_url.rsplit(":", 1)[1])
    try:  # the command line `make run` and the image use (frontdoor_ledger.serve)
        from frontdoor_ledger.serve import granian_argv
        argv = granian_argv("127.0.0.1", port, workers)
    except ImportError:  # a ledger from before the launcher (an A/B run)
        argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(workers), "--no-ws", "frontdoor_ledger.asgi:app"]
    log = open(stack.root / "ledger.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        argv,
        env={**stack.issuer_env(), "FRONTDOOR_LEDGER_BASE_URL": ledger_url}, stdout=log, stderr=log,
        stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{ledger_url}/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    stop_process_group(proc)
    raise RuntimeError("the ledger did not start:\n" + (stack.root / "ledger.log").read_text()[-2000:])


async def configure(stack: Stack, receiver: Receiver) -> str:
    """A perform endpoint and an operation kind for the tenant; answers a resource credential."""
    from frontdoor_core.db import create_pool
    from frontdoor_operations.kinds import KindInput, put_kind
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.credentials.key_encryption import Kek
    from frontdoor_webhooks.endpoints import create_endpoint

    assert stack.tenant is not None
    actor = Actor(tenant_id=stack.tenant.id, type="system")
    pool = await create_pool(stack.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            created = await create_endpoint(conn, actor, url=receiver.hook_url("perform"),
                                            kek=Kek.from_env_value(stack.kek_value), now=datetime.now(UTC),
                                            allow_insecure=True)
            await put_kind(conn, actor, "bench.buy", KindInput(perform_endpoint_id=created.endpoint.id),
                           now=datetime.now(UTC))
    finally:
        await pool.close()
    receiver.control("perform", secret=created.secret)
    return await stack.resource_credential()


async def measure(stack: Stack, agent: Agent, receiver: Receiver, ledger_url: str, credential: str,
                  args: argparse.Namespace, ledger_pid: int | None = None) -> dict[str, Any]:
    import httpx

    assert stack.tenant is not None
    slug, issuer = stack.tenant.slug, stack.tenant.issuer
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=64)) as http:
        # Before the window: a Session and a proposal per operation.
        prepared = []
        for i in range(args.warmup + args.operations):
            body, headers = agent.token_request(issuer, f"bench-user-{i}")
            session = (await http.post(f"{issuer}/oauth/token", content=body, headers={**FORM_HEADERS, **headers}))
            session.raise_for_status()
            token = session.json()
            proposed = await http.post(f"{ledger_url}/{slug}/v1/operations", headers={
                "Authorization": f"Bearer {credential}"}, json={
                "kind": "bench.buy", "summary": f"Buy item {i} for 1.00 EUR", "user_approval_required": True,
                "caller": {"session_id": token["session_id"], "client_id": agent.client_id,
                           "user_id": f"bench-user-{i}"}})
            proposed.raise_for_status()
            op = proposed.json()["operation"]
            url = f"{ledger_url}/{slug}/operations/{op['operation_id']}/confirm"
            prepared.append((op["operation_id"], url, token["access_token"]))
        # Baseline: an empty POST round trip to the same receiver, same client.
        empty = []
        for _ in range(200):
            t0 = time.perf_counter()
            (await http.post(f"{receiver.base_url}/empty", content=b"")).raise_for_status()
            empty.append(time.perf_counter() - t0)

        latencies: list[float] = []
        round_trips: list[float] = []
        states: dict[str, int] = {}
        sent_at: dict[str, float] = {}
        answered_at: dict[str, float] = {}

        # The timed confirms go over a lean loopback client (bench/_loopback_client.py): httpx
        # cost this process more CPU per confirm than the ledger's (6.5 vs 5.8 ms at 200/s).
        # At most 64 in flight; a confirm waiting for a connection is still timed from its
        # scheduled start, so a saturated ledger shows as latency, not as a lower rate.
        loopback = LoopbackClient(ledger_url, connections=64)

        async def confirm(op_id: str, url: str, access: str) -> None:
            t0 = time.monotonic()  # the receiver stamps arrivals with time.monotonic() too
            sent_at[op_id] = t0
            headers = {"Authorization": f"DPoP {access}", "DPoP": agent.dpop("POST", url, token=access),
                       "Content-Type": "application/json"}
            status, answer = await loopback.post(url[len(ledger_url):], headers, b'{"revision":1,"approved_by":"user"}')
            answered_at[op_id] = time.monotonic()
            if op_id in timed:
                round_trips.append(answered_at[op_id] - t0)
            state = json.loads(answer).get("state", f"http {status}") if status == 200 else f"http {status}"
            (states if op_id in timed else warm_states)[state] = (states if op_id in timed else warm_states).get(
                state, 0) + 1

        interval = 1.0 / args.rate
        warm, window = prepared[:args.warmup], prepared[args.warmup:]
        timed = {op_id for op_id, _, _ in window}
        warm_states: dict[str, int] = {}

        async def send_at_rate(items: list[tuple[str, str, str]], start: float) -> list[asyncio.Task[None]]:
            tasks = []
            for n, item in enumerate(items):
                delay = start + n * interval - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(confirm(*item)))
            return tasks

        first = time.monotonic()
        # The warm-up at the rate; the window starts once every warm-up confirm is answered, so
        # none of their work is counted in the window's CPU (on a saturated ledger a backlog
        # of them would be) and the window starts from a warm, idle ledger.
        await asyncio.gather(*await send_at_rate(warm, time.perf_counter()))
        meter = CpuMeter({"ledger (granian)": ledger_pid, "postgres": stack.pids["postgres"],
                          "redis": stack.pids["redis"], "receiver": receiver.pid})
        spy_out = stack.root / "ledger.pyspy.txt" if args.profile and ledger_pid and find_py_spy() else None
        with (py_spy_record(ledger_pid, spy_out, seconds=600) if spy_out is not None and ledger_pid
              else contextlib.nullcontext()):
            meter.start()
            start = time.perf_counter()
            tasks = await send_at_rate(window, start)
            await asyncio.gather(*tasks)
            elapsed = time.perf_counter() - start
            cpu = meter.stop()
        profile = summarize_collapsed(spy_out, top=25) if spy_out is not None else []
        if spy_out is not None and os.environ.get("BENCH_KEEP_PROFILE"):
            shutil.copy(spy_out, os.environ["BENCH_KEEP_PROFILE"])
        await loopback.aclose()
        arrived: dict[str, float] = {}
        stats = receiver.stats("perform", records=True)
        for _msg_id, key, at, _sig_ok in stats["records"]:
            arrived.setdefault(key, at)
        for op_id, _, _ in window:
            if op_id in arrived:
                latencies.append(arrived[op_id] - sent_at[op_id])
        warm_latencies = [arrived[op_id] - sent_at[op_id] for op_id, _, _ in warm if op_id in arrived]
        timeline = [{
            "n": n, "warmup": n < len(warm), "scheduled": round(n * interval, 6),
            "sent": round(sent_at[op_id] - first, 6),
            "answered": round(answered_at[op_id] - first, 6) if op_id in answered_at else None,
            "received": round(arrived[op_id] - first, 6) if op_id in arrived else None,
        } for n, (op_id, _, _) in enumerate(prepared)]
    window_records = [r for r in stats["records"] if r[1] in timed]  # the timed window's deliveries only
    return {"bad_signatures": stats["bad_signatures"], "performs": len({r[1] for r in window_records}),
            "raw": len(window_records), "warmup": args.warmup, "warm_received": len(warm_latencies),
            "warm_states": warm_states, "warm_to_webhook": summarize(warm_latencies) if warm_latencies else None,
            "confirm_to_webhook": summarize(latencies), "confirm_round_trip": summarize(round_trips),
            "empty_round_trip": summarize(empty), "received": len(latencies), "operations": args.operations,
            "states": states, "achieved_rate": args.operations / elapsed, "rate": args.rate,
            "workers": args.workers, "profile": profile, "timeline": timeline,
            "cpu_ms_per_confirm": {k: 1000 * v / args.operations for k, v in cpu.items()},
            "other_cpus": cpu.get("other processes", 0.0) / elapsed}


def report(result: dict[str, Any]) -> bool:
    c, rt, e = result["confirm_to_webhook"], result["confirm_round_trip"], result["empty_round_trip"]
    print(f"ledger: granian {result['workers']} worker(s), {os.cpu_count()} CPUs; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    if result.get("warm_to_webhook") is not None:
        print(f"warm-up (fresh ledger, not in the figures below) {result['warm_to_webhook'].line()}; "
              f"received {result['warm_received']}/{result['warmup']}, states {result['warm_states']}")
    print(f"confirm → webhook received   {c.line()}")
    print(f"confirm round trip (outcome) {rt.line()}")
    print(f"empty HTTP round trip        {e.line()}")
    print(f"ratio p50 (confirm→webhook / empty round trip): {c.p50_ms / e.p50_ms:.1f}x")
    cpu = dict(result["cpu_ms_per_confirm"])
    cpu.pop("other processes", None)
    print("CPU per confirm: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cpu.items()))
    yardstick = cpu.get("load generator", 0.0)
    if yardstick > 0:
        # The load generator does the same work for every confirm in every run (sign a DPoP proof,
        # send, read): its CPU per confirm tracks the host's speed, which moves between runs on a
        # virtual machine (bench/README.md). Relative to it, runs compare across host speeds.
        print("CPU relative to the load generator (the host's speed factored out): "
              + ", ".join(f"{name} {ms / yardstick:.2f}x" for name, ms in cpu.items() if name != "load generator"))
    if result["other_cpus"] > 0.1:
        print(f"NOTE: other processes kept {result['other_cpus']:.2f} CPUs busy during the window: figures are noisy")
    print(f"received {result['received']}/{result['operations']} at {result['achieved_rate']:.1f} confirms/s "
          f"(target {result['rate']:.0f}); final states {result['states']}")
    answered = sum(n for state, n in result["states"].items() if state in ("succeeded", "failed"))
    share = answered / result["operations"] if result["operations"] else 0.0
    result["answered_share"] = share
    print(f"outcome in the confirm's answer: {answered}/{result['operations']} = {100 * share:.1f} % "
          f"(target ≥ {100 * TARGET_ANSWERED_SHARE:.0f} %)")
    ok = (c.p50_ms <= TARGET_P50_MS and c.p99_ms <= TARGET_P99_MS
          and result["received"] == result["operations"] and share >= TARGET_ANSWERED_SHARE)
    print(f"receiver: {result['raw']} deliveries, {result['performs']} performs, "
          f"{result['bad_signatures']} bad signatures")
    ok = ok and result["bad_signatures"] == 0 and result["performs"] == result["operations"]
    print(f"target p50 ≤ {TARGET_P50_MS:.0f} ms, p99 ≤ {TARGET_P99_MS:.0f} ms: {'met' if ok else 'NOT met'}")
    if result["profile"]:
        print("py-spy of the ledger during the timed window:")
        for line in result["profile"]:
            print("  " + line)
    return ok


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    install_signal_handlers()
    with Stack() as stack:
        receiver = Receiver()
        try:
            asyncio.run(stack.create_tenant())
            agent = stack.agent_host.publish(OperationsAgent(stack.agent_host.base_url))  # type: ignore[union-attr]
            stack.start_issuer()
            ledger_url = f"http://127.0.0.1:{free_port()}"
            ledger = start_ledger(stack, ledger_url, args.workers)
            try:
                credential = asyncio.run(configure(stack, receiver))
                result = asyncio.run(measure(stack, agent, receiver, ledger_url, credential, args, ledger.pid))
            finally:
                stop_process_group(ledger)
        finally:
            receiver.stop()
    result["ok"] = report(result)
    if args.timeline:
        Path(args.timeline).write_text("".join(json.dumps(row) + "\n" for row in result["timeline"]))
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
