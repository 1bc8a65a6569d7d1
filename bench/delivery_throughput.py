"""Webhook delivery throughput through the real path, beside the receiver alone.

Stack: embedded PostgreSQL and Redis, one deliverer (``python -m
frontdoor_dispatcher.deliverer``, as each dispatcher replica runs it) and a company
receiver in its own process that checks every signature. Two receivers (``--receiver``):

* ``app``: what a company runs (``bench/_receiver_app.py``): a Litestar app under granian
  with 1 worker that verifies each delivery with the sdk's ``WebhookVerifier`` (Standard
  Webhooks signature, time tolerance, body parsed, replay cache) and answers 200. The
  target's ratio is judged with it: does the deliverer, or the company's receiver, limit
  deliveries to a company?
* ``raw``: a raw asyncio server with its own HMAC check (``bench/_receiver.py``), a few
  microseconds a request: the deliverer's own ceiling (its rate and CPU are judged with it).
* ``both`` (the default): the three phases against ``app``, then against ``raw``.

On one machine the receiver shares the CPUs with the deliverer and PostgreSQL, so the ratio
measures CPU shares as much as any limit. ``--split-cores`` pins the receiver to the last
CPU and everything else (PostgreSQL, Redis, the deliverer, this load generator) to the
others, as a company's receiver runs on its own machine.

Messages are written with ``frontdoor_webhooks.messages.enqueue_message``, as the services
write them (one ``NOTIFY`` each); the deliverer claims them from PostgreSQL in batches,
signs, POSTs over keep-alive connections and records each (docs/adr/0006). For each receiver:

1. **baseline**: the receiver alone (no deliverer running), hammered by an HTTP client in
   this process (signed POSTs, 16 keep-alive connections as the deliverer's 16 per
   endpoint, the deliverer's lean ``DeliveryClient``); measured again after the backlog,
   and the ratio divides by the mean of the two (a shared machine's load drifts).
2. **steady**: once the deliverer listens, messages written at ``--rate`` per second for
   ``--seconds``; reported: delivered per second over the window and the lag from write to
   receipt (p50/p99).
3. **backlog**: with the deliverer stopped, ``--backlog`` messages are written; the
   deliverer starts and the time until the receiver has every one is the drain time; the
   sustained rate is first to last receipt. Checked: every message ``delivered`` in
   PostgreSQL, every webhook-id received once, no bad signature. CPU per delivery: each
   process's CPU seconds over the drain divided by the messages; the deliverer's start-up
   (its CPU until the first receipt) is also shown apart, with its CPU per delivery after it.

Targets (issue #13 §3): ≥ 1,000 deliveries/s sustained and ≥ 0.6 of the receiver alone,
the deliverer's CPU ≤ 0.7 ms per delivery, a 100,000-message backlog drained with none
lost, duplicated or badly signed, lag p99 ≤ 250 ms at 500/s.

    python bench/delivery_throughput.py [--receiver both|app|raw] [--split-cores] [--rate 500] [--seconds 15]
                                        [--backlog 100000]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import os
import time
from typing import Any

from bench import _dispatch
from bench._common import CpuMeter, Stack, cpu_seconds, install_signal_handlers, process_tree, summarize
from bench._receiver import ReceiverProcess
from bench._receiver_app import AppReceiverProcess

Receiver = ReceiverProcess | AppReceiverProcess

TARGET_RATE = 1000.0
TARGET_RATIO = 0.6
TARGET_CPU_MS = 0.7
TARGET_LAG_P99_MS = 250.0
STEADY_RATE = 500.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=STEADY_RATE, help="messages written per second in the steady phase")
    p.add_argument("--seconds", type=float, default=15.0, help="length of the steady phase")
    p.add_argument("--backlog", type=int, default=100_000, help="messages in the backlog phase (0 skips it)")
    p.add_argument("--baseline-requests", type=int, default=5000)
    p.add_argument("--receiver", choices=("both", "app", "raw"), default="both",
                   help="the company's receiver: app (Litestar under granian with the sdk's verifier, what a company "
                        "runs), raw (raw asyncio, the deliverer's ceiling) or both, one after the other (default)")
    p.add_argument("--split-cores", action="store_true",
                   help="pin the receiver to the last CPU and everything else (PostgreSQL, Redis, the deliverer, "
                        "this load generator) to the others: a company's receiver runs on its own machine")
    p.add_argument("--quick", action="store_true", help="small counts, for a quick look")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.backlog, args.baseline_requests = 3.0, 1000, 1000
    if args.rate <= 0 or args.seconds <= 0 or args.backlog < 0:
        p.error("rates, counts and durations must be positive")
    return args


async def baseline(receiver: Receiver, secret: str, requests: int, concurrency: int = 16) -> dict[str, Any]:
    """The receiver alone: signed POSTs over keep-alive connections, as fast as it answers.

    The client is the deliverer's own (`DeliveryClient`): an httpx client here spent about
    2 ms of CPU per request, so it, not the receiver, set the pace of this phase.
    """
    from frontdoor_core.outbound import OutboundPolicy
    from frontdoor_webhooks.delivery_client import DeliveryClient
    from frontdoor_webhooks.signing import webhook_headers

    body = b'{"type":"operation.succeeded","timestamp":"2026-01-01T00:00:00.000Z","data":{"seq":0}}'
    receiver.control("baseline", secret=secret, body="{}")
    url = receiver.hook_url("baseline")
    latencies: list[float] = []
    http = DeliveryClient(OutboundPolicy(allow_http_loopback=True, allowlist=("127.0.0.1/32",), total_timeout=30.0),
                          max_connections=concurrency)
    try:
        async def one(n: int) -> None:
            headers = webhook_headers([secret], f"msg_base{n}", int(time.time()), body)
            t0 = time.perf_counter()
            answer = await http.post(url, body, headers=headers)
            if not 200 <= answer.status < 300:
                raise RuntimeError(f"the receiver answered {answer.status}")
            latencies.append(time.perf_counter() - t0)

        async def lane(lane_no: int) -> None:
            for n in range(lane_no, requests, concurrency):
                await one(n)

        await asyncio.gather(*(lane(i) for i in range(concurrency)))  # warm the connections
        latencies.clear()
        meter = CpuMeter({"receiver": receiver.pid})
        meter.start()
        t0 = time.perf_counter()
        await asyncio.gather(*(lane(i) for i in range(concurrency)))
        elapsed = time.perf_counter() - t0
        cpu = meter.stop()
    finally:
        await http.aclose()
    stats = receiver.stats("baseline")
    return {"rps": requests / elapsed, "latency": summarize(latencies), "bad_signatures": stats["bad_signatures"],
            "cpu": {name: 1000 * v / requests for name, v in cpu.items()}}


def wait_listening(deliverer: _dispatch.Service, heartbeat: Path, within: float = 60.0) -> None:
    """Wait until the deliverer listens (its loop touches its heartbeat file after ``LISTEN``).

    The steady phase measures lag in steady state, not the deliverer's start-up.
    """
    deadline = time.monotonic() + within
    while not heartbeat.exists():
        if time.monotonic() > deadline or not deliverer.alive():
            raise RuntimeError(f"the deliverer did not start:\n{deliverer.log_tail()}")
        time.sleep(0.05)


async def wait_received(receiver: Receiver, name: str, expected: int, within: float) -> dict[str, Any]:
    """Poll the receiver until it has ``expected`` distinct webhook-ids (or time runs out)."""
    deadline = time.monotonic() + within
    while True:
        stats = receiver.stats(name)
        if stats["distinct_ids"] >= expected or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.1)


async def steady(stack: Stack, receiver: Receiver, tenant_id: str, endpoint_id: str,
                 args: argparse.Namespace) -> dict[str, Any]:
    """Write at ``rate`` for ``seconds`` (a batch every 50 ms); measure receipt rate and lag."""
    from frontdoor_core.db import create_pool

    pool = await create_pool(stack.database_url, min_size=1, max_size=2)
    try:
        tick = 0.05
        written: dict[str, float] = {}
        start = time.monotonic()
        k = 0
        while (k := k + 1) * tick <= args.seconds:
            due = int(args.rate * tick * k) - len(written)
            if due:
                at = time.monotonic()
                for mid in await _dispatch.enqueue(pool, tenant_id, endpoint_id, due, start=len(written)):
                    written[mid] = at
            await asyncio.sleep(max(0.0, start + k * tick - time.monotonic()))
        write_window = time.monotonic() - start
        stats = await wait_received(receiver, "steady", len(written), within=60)
        await asyncio.sleep(1.0)  # the last attempts' rows commit just after the receiver answers
        states = await _dispatch.message_states(pool, list(written))
    finally:
        await pool.close()
    records = receiver.stats("steady", records=True)["records"]
    first: dict[str, float] = {}
    for msg_id, _key, at, _ok in records:
        first.setdefault(msg_id, at)
    lags = [first[m] - t for m, t in written.items() if m in first]
    arrivals = sorted(first.values())
    span = (arrivals[-1] - start) if arrivals else 0.0
    return {"written": len(written), "write_rate": len(written) / write_window, "received": stats["distinct_ids"],
            "raw": stats["raw"], "bad_signatures": stats["bad_signatures"], "lag": summarize(lags) if lags else None,
            "delivered_rate": len(arrivals) / span if span else 0.0, "states": states}


async def backlog(stack: Stack, receiver: Receiver, deliverer: _dispatch.Service, tenant_id: str,
                  endpoint_id: str, count: int, meter: dict[str, int | None]) -> dict[str, Any]:
    """Write ``count`` messages with the deliverer stopped, start it, time the drain, check every message."""
    from frontdoor_core.db import create_pool

    deliverer.stop()
    pool = await create_pool(stack.database_url, min_size=1, max_size=2)
    try:
        ids: list[str] = []
        for start in range(0, count, 1000):
            ids += await _dispatch.enqueue(pool, tenant_id, endpoint_id, min(1000, count - start), start=start)
        updates_before = await _message_updates(pool)
        t0 = time.monotonic()
        deliverer.start()
        cpu_meter = CpuMeter({**meter, "deliverer": deliverer.pid})
        cpu_meter.start()
        # CpuMeter fixes each process tree when it starts: the PostgreSQL backends serving the
        # deliverer connect after that, so PostgreSQL's tree is read again when the drain ends.
        pg = meter.get("postgres")
        pg_before = cpu_seconds(process_tree(pg)) if pg else 0.0
        # The deliverer's CPU until the first receipt is its start-up (imports, pools), not delivery.
        started_cpu = cpu_seconds(process_tree(deliverer.pid)) if deliverer.pid else 0.0
        first = await wait_received(receiver, "backlog", 1, within=60.0)
        startup = (cpu_seconds(process_tree(deliverer.pid)) - started_cpu) if deliverer.pid else 0.0
        stats = await wait_received(receiver, "backlog", count, within=max(120.0, count / 20))
        drain = time.monotonic() - t0
        cpu = cpu_meter.stop()
        if pg:
            grown = cpu_seconds(process_tree(pg)) - pg_before
            cpu["other processes"] = max(cpu["other processes"] - (grown - cpu["postgres"]), 0.0)
            cpu["postgres"] = grown
        await asyncio.sleep(1.0)  # let the last attempts' rows commit
        states = await _dispatch.message_states(pool, ids)
        # An idle backend reports its last second's counts up to 10 s later (PGSTAT_IDLE_INTERVAL):
        # wait until every message's claim and settle (2 updates at least) is counted, 12 s at most.
        for _ in range(60):
            updates = [b - a for a, b in zip(updates_before, await _message_updates(pool), strict=True)]
            if updates[0] >= 2 * count:
                break
            await asyncio.sleep(0.2)
    finally:
        await pool.close()
    records = receiver.stats("backlog", records=True)["records"]
    received_ids = {r[0] for r in records}
    enqueued = set(ids)
    first_to_last = (stats["last_arrival"] - stats["first_arrival"]) if stats["first_arrival"] else 0.0
    return {"count": count, "drain_seconds": drain, "rate": stats["distinct_ids"] / drain,
            "flow_rate": stats["distinct_ids"] / first_to_last if first_to_last else 0.0,
            "missing": len(enqueued - received_ids), "unexpected": len(received_ids - enqueued),
            "duplicates": len(records) - len(received_ids), "bad_signatures": stats["bad_signatures"],
            "states": states, "cpu": cpu, "startup_cpu": startup, "first_received": first["distinct_ids"],
            "updates": updates}


async def _message_updates(pool: Any) -> tuple[int, int]:
    """``webhook_messages``' row updates and HOT updates so far (PostgreSQL's counters).

    Other backends' counts arrive in the shared statistics a while after their statements
    (at most once a second while busy, 10 s after they went idle).
    """
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        row = await conn.fetchrow("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                                  " WHERE relname = 'webhook_messages'")
    return (int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])) if row else (0, 0)


RECEIVERS = {
    "app": "Litestar under granian (1 worker), verifying with the sdk's WebhookVerifier: what a company runs",
    "raw": "raw asyncio, its own HMAC check, a few microseconds a request: the deliverer's ceiling",
}


def run_report(run: dict[str, Any], args: argparse.Namespace) -> bool:
    """One receiver's phases; sets the run's ``sustained``, ``ratio``, ``cpu_ms``, ``lag_p99`` and ``ok``."""
    b, s = run["baseline"], run["steady"]
    alone = b["rps"]
    print(f"  receiver {run['mode']}: {RECEIVERS[run['mode']]}")
    print(f"  baseline : receiver alone {b['rps']:.0f} req/s  {b['latency'].line()}  "
          f"(bad signatures {b['bad_signatures']})")
    print("             CPU per request: " + ", ".join(f"{n} {v:.2f} ms" for n, v in b["cpu"].items()))
    if "baseline_after" in run:
        a = run["baseline_after"]
        alone = (b["rps"] + a["rps"]) / 2
        print(f"             again after the phases: {a['rps']:.0f} req/s  {a['latency'].line()}; "
              f"the ratio uses the mean, {alone:.0f} req/s")
        if max(a["rps"], b["rps"]) > 1.3 * min(a["rps"], b["rps"]):
            print("             NOTE: the receiver alone moved by more than 30 % during the run (other load): "
                  "the ratio is noisy")
    lag = s["lag"].line() if s["lag"] else "n/a"
    print(f"  steady   : wrote {s['written']} at {s['write_rate']:.0f}/s; received {s['received']} distinct "
          f"({s['raw']} raw) at {s['delivered_rate']:.0f}/s; lag write→receipt {lag}")
    print(f"             states {s['states']}; bad signatures {s['bad_signatures']}")
    ok = b["bad_signatures"] == 0 and run.get("baseline_after", b)["bad_signatures"] == 0 and s["received"] == s["written"] and s["bad_signatures"] == 0 \
        and s["raw"] == s["received"] and s["states"].get("delivered") == s["written"]
    sustained = s["delivered_rate"]
    cpu_ms = None
    if "backlog" in run:
        k = run["backlog"]
        per = {name: 1000 * v / max(k["count"], 1) for name, v in k["cpu"].items()}
        cpu_ms = per.get("deliverer")
        print(f"  backlog  : {k['count']} messages drained in {k['drain_seconds']:.1f} s from the deliverer's start "
              f"= {k['rate']:.0f}/s ({k['flow_rate']:.0f}/s from first to last receipt); "
              f"missing {k['missing']}, duplicates {k['duplicates']} (same webhook-id), unexpected {k['unexpected']}, "
              f"bad signatures {k['bad_signatures']}; states {k['states']}")
        print("             CPU per delivery: " + ", ".join(f"{n} {v:.2f} ms" for n, v in per.items()))
        upd, hot = k["updates"]
        print(f"             webhook_messages: {upd / max(k['count'], 1):.2f} row updates per delivery, "
              f"{hot / max(k['count'], 1):.2f} of them HOT (no index entries; the claim's, when its page has room)")
        after = k["count"] - k["first_received"]
        if "deliverer" in k["cpu"] and after > 0:
            print(f"             deliverer: {k['startup_cpu']:.2f} s of CPU before its first delivery (start-up), "
                  f"{1000 * (k['cpu']['deliverer'] - k['startup_cpu']) / after:.2f} ms per delivery after it")
        if per.get("other processes", 0.0) > 0.2 * sum(per.values()):
            print("             NOTE: other processes used a large share of the CPU during the drain: figures are noisy")
        ok = ok and k["missing"] == 0 and k["unexpected"] == 0 and k["bad_signatures"] == 0 \
            and k["duplicates"] == 0 and k["states"].get("delivered") == k["count"]
        sustained = k["flow_rate"]
    ratio = sustained / alone if alone else 0.0
    what = ("how close the deliverer comes to what this receiver can take: the target's ratio"
            if run["mode"] == "app" else
            ("the deliverer's own ceiling on the CPUs it shares with PostgreSQL, the receiver apart; not the target's "
             "ratio" if args.split_cores else
             f"the deliverer's own ceiling on {os.cpu_count()} cores shared with PostgreSQL and the receiver; "
             "not the target's ratio"))
    print(f"  ratio    : sustained {sustained:.0f}/s / receiver alone {alone:.0f} req/s = {ratio:.2f}  ({what})")
    print(f"  checks   : 0 lost, 0 duplicated, 0 bad signatures, every message delivered in PostgreSQL: "
          f"{'ok' if ok else 'FAILED'}")
    run.update(sustained=sustained, ratio=ratio, cpu_ms=cpu_ms,
               lag_p99=s["lag"].p99_ms if s["lag"] else float("inf"), ok=ok)
    return ok


def report(result: dict[str, Any], args: argparse.Namespace) -> bool:
    """Every receiver's block, then the targets: each judged against the receiver it is about.

    The ratio (>= 0.6 of the receiver alone) asks whether the deliverer, not the company's
    receiver, limits deliveries: it is judged with the company-like receiver (``app``). The
    rate and the deliverer's CPU are the deliverer's own capacity: judged with the raw
    receiver when it ran (a company-like receiver caps the rate below what the deliverer can
    do), else with the app; so is the lag at ``--rate`` (a receiver that cannot take that
    rate queues it; its lag is printed beside). The checks hold for every receiver.
    """
    runs = result["runs"]
    where = ("the receiver pinned to its own CPU, the rest to the others" if args.split_cores
             else "everything sharing every CPU")
    print(f"delivery_throughput  (one deliverer, receiver in its own process, {os.cpu_count()} CPUs, "
          f"everything on this machine, {where}; --receiver {args.receiver})")
    ok = True
    for mode in runs:
        ok = run_report(runs[mode], args) and ok

    def verdict(met: bool) -> str:
        return "met" if met else "BELOW"

    capacity = runs.get("raw") or runs["app"]
    sustained, cpu_ms = capacity["sustained"], capacity["cpu_ms"]
    lag_p99 = capacity["lag_p99"]
    parts = [f">= {TARGET_RATE:.0f} deliveries/s sustained ({capacity['mode']} receiver): "
             f"{verdict(sustained >= TARGET_RATE)} ({sustained:.0f}/s)",
             f"deliverer CPU <= {TARGET_CPU_MS} ms/delivery ({capacity['mode']}): "
             + ("n/a" if cpu_ms is None else f"{verdict(cpu_ms <= TARGET_CPU_MS)} ({cpu_ms:.2f} ms)")]
    if "app" in runs:
        ratio = runs["app"]["ratio"]
        parts.append(f">= {TARGET_RATIO} of the receiver alone (app receiver): {verdict(ratio >= TARGET_RATIO)} "
                     f"({ratio:.2f})")
    else:
        ratio = None
        parts.append(f">= {TARGET_RATIO} of the receiver alone: n/a (judged with --receiver app or both)")
    others = "".join(f", {m} receiver {r['lag_p99']:.0f} ms" for m, r in runs.items() if r is not capacity)
    parts.append(f"lag p99 <= {TARGET_LAG_P99_MS:.0f} ms at {args.rate:.0f}/s ({capacity['mode']} receiver): "
                 f"{verdict(lag_p99 <= TARGET_LAG_P99_MS)} ({lag_p99:.0f} ms{others})")
    parts.append(f"correctness {'ok' if ok else 'FAILED'}")
    print("  target   : " + "; ".join(parts))
    result.update(sustained=sustained, ratio=ratio, met=sustained >= TARGET_RATE)
    return ok


def split_cores() -> tuple[set[int], set[int]] | None:
    """``(the receiver's CPUs, everyone else's)`` for ``--split-cores``: the last CPU apart."""
    cpus = sorted(os.sched_getaffinity(0))
    return ({cpus[-1]}, set(cpus[:-1])) if len(cpus) >= 2 else None


def pin_tree(root: int, cpus: set[int]) -> int:
    """Pin every thread of ``root`` and its descendants to ``cpus`` (threads they start later inherit it)."""
    pinned = 0
    for pid in process_tree(root):
        for tid in (int(t) for t in os.listdir(f"/proc/{pid}/task")) if os.path.isdir(f"/proc/{pid}/task") else ():
            try:
                os.sched_setaffinity(tid, cpus)
                pinned += 1
            except OSError:  # the thread ended meanwhile
                pass
    return pinned


def start_receiver(mode: str, stack: Stack, cpus: set[int] | None = None) -> Receiver:
    """The receiver process of ``mode``, stopped with the stack (pinned to ``cpus`` if given)."""
    if mode == "app":
        receiver: Receiver = AppReceiverProcess(str(stack.root / "receiver-app.log"))
    else:
        receiver = ReceiverProcess(str(stack.root / "receiver.log"))
    stack._stack.callback(receiver.stop)
    if cpus is not None:
        pin_tree(receiver.pid, cpus)
    return receiver


def start_deliverer(deliverer: _dispatch.Service, heartbeat: Path) -> None:
    """Start the deliverer and wait until it listens (a fresh heartbeat file)."""
    heartbeat.unlink(missing_ok=True)
    deliverer.start()
    wait_listening(deliverer, heartbeat)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    install_signal_handlers()
    modes = ["app", "raw"] if args.receiver == "both" else [args.receiver]
    print(f"delivery_throughput: --receiver {args.receiver} ({', '.join(modes)})", flush=True)
    split = split_cores() if args.split_cores else None
    if split is not None:
        # This process's CPUs before the stack starts: PostgreSQL, Redis and the deliverer inherit them.
        os.sched_setaffinity(0, split[1])
        print(f"  --split-cores: the receiver on CPU {sorted(split[0])}, everything else on CPU {sorted(split[1])}",
              flush=True)
    elif args.split_cores:
        print("  --split-cores: needs 2 CPUs or more; not split", flush=True)
    with Stack() as stack:
        tenant = asyncio.run(stack.create_tenant())
        env = _dispatch.service_env(stack, {"FRONTDOOR_LOG_LEVEL": "warning"})
        heartbeat = Path(env["FRONTDOOR_DATA_DIR"]) / "deliverer-heartbeat"
        heartbeat.parent.mkdir(parents=True, exist_ok=True)
        deliverer = _dispatch.deliverer(stack, env)
        runs: dict[str, dict[str, Any]] = {}
        for mode in modes:
            receiver = start_receiver(mode, stack, split[0] if split else None)
            steady_ep, steady_secret = asyncio.run(_dispatch.add_endpoint(stack, receiver.hook_url("steady")))
            backlog_ep, backlog_secret = asyncio.run(_dispatch.add_endpoint(stack, receiver.hook_url("backlog")))
            receiver.control("steady", secret=steady_secret, body="{}")
            receiver.control("backlog", secret=backlog_secret, body="{}")
            deliverer.stop()  # the receiver alone: no deliverer running beside it
            run: dict[str, Any] = {"mode": mode,
                                   "baseline": asyncio.run(baseline(receiver, steady_secret, args.baseline_requests))}
            print(f"  [{mode}] baseline {run['baseline']['rps']:.0f} req/s", flush=True)
            start_deliverer(deliverer, heartbeat)
            run["steady"] = asyncio.run(steady(stack, receiver, tenant.id, steady_ep, args))
            print(f"  [{mode}] steady {run['steady']['delivered_rate']:.0f}/s", flush=True)
            if args.backlog:
                pids = {"receiver": receiver.pid,
                        **{k: v for k, v in stack.pids.items() if k in ("postgres", "redis")}}
                run["backlog"] = asyncio.run(backlog(stack, receiver, deliverer, tenant.id, backlog_ep, args.backlog,
                                                     pids))
                print(f"  [{mode}] backlog {run['backlog']['flow_rate']:.0f}/s", flush=True)
            deliverer.stop()  # the receiver alone again: the load of a shared machine drifts over a run
            run["baseline_after"] = asyncio.run(baseline(receiver, steady_secret, args.baseline_requests))
            print(f"  [{mode}] baseline after {run['baseline_after']['rps']:.0f} req/s", flush=True)
            runs[mode] = run
        result: dict[str, Any] = {"runs": runs}
        print()
        result["ok"] = report(result, args)
    return result


if __name__ == "__main__":
    try:
        sys.exit(0 if main()["ok"] else 1)
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        sys.exit(130)
