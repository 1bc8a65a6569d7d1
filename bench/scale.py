"""Flat at scale (issue #15 §3): the hot paths with one tenant, then with many, in one run.

    python bench/scale.py                  # 1,000 tenants, 100k Sessions, 100k operations, 1M attempts
    python bench/scale.py --full           # 10,000 tenants, 1M Sessions, 1M operations, 10M attempts
    python bench/scale.py --quick          # 200 tenants, 20k / 20k / 100k (a smoke run)
    python bench/scale.py --explain        # also print the plan of every hot query on the big data
    python bench/scale.py --per-query      # also time each of the overview's five queries on its own
    python bench/scale.py --buffers        # EXPLAIN (ANALYZE, BUFFERS) of the overview's queries, both stacks

Two stacks side by side (bench/_common.Stack: each its own embedded PostgreSQL and Redis, the
migrations, the issuer under granian with one worker), each with the same probe tenant; then
``frontdoor_devstack.scale_seed`` writes the other tenants and their history into the second
one (``INSERT ... SELECT generate_series``, then ANALYZE), and the same measurements run on
both in alternation (``--rounds``, the order swapped each round), so that the machine's other
load falls on the baseline and the large figures alike. Printed side by side with the ratio
large / baseline, the median of the rounds' own ratios (target <= 1.2):

- **Session grant**: ``POST {issuer}/oauth/token`` (jwt-bearer, DPoP), as the issuer serves it.
- **introspection**: ``POST {issuer}/oauth/introspect`` with a resource-server credential.
- **confirm**: ``frontdoor_operations.ledger.confirm`` in this process on the services' pool
  (the compare-and-set, the perform message, the events: every statement the ledger's confirm
  sends), one proposed operation of the probe tenant each time. The HTTP around it does not
  depend on the data's size; bench/confirm_latency.py measures it end to end.
- **dashboard overview** and **dashboard lists**: the repository calls of the console's
  heaviest pages (the overview's delivery health, failed attempts by day, operations per
  day and by state, stuck operations; the Sessions, operations, agents, audit and messages
  lists), in this process on the pool, for the probe tenant.

Latency is per call as the caller saw it; for the HTTP paths the issuer's CPU per request
is printed too (the steadier figure on a shared machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._common import CpuMeter, Stack, Summary, fmt_ms, install_signal_handlers, summarize

TARGET_RATIO = 1.2
SIZES = {
    "quick": {"tenants": 200, "sessions": 20_000, "operations": 20_000, "attempts": 100_000},
    "default": {"tenants": 1_000, "sessions": 100_000, "operations": 100_000, "attempts": 1_000_000},
    "full": {"tenants": 10_000, "sessions": 1_000_000, "operations": 1_000_000, "attempts": 10_000_000},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="The hot paths with one tenant and with many, side by side.")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a small seed, for a smoke run")
    size.add_argument("--full", action="store_true", help="issue #15's figures (hours on a 2-core machine)")
    for name in ("tenants", "sessions", "operations", "attempts"):
        p.add_argument(f"--{name}", type=int, default=None, help="override the chosen size")
    p.add_argument("--requests", type=int, default=300, help="calls per measurement (HTTP paths)")
    p.add_argument("--calls", type=int, default=200, help="calls per measurement (in-process paths)")
    p.add_argument("--concurrency", type=int, default=4, help="HTTP requests in flight")
    p.add_argument("--rounds", type=int, default=3, help="alternating measurement rounds of each stack")
    p.add_argument("--explain", action="store_true", help="print every hot query's plan on the big data")
    p.add_argument("--per-query", action="store_true",
                   help="also time each of the dashboard overview's five queries on its own (alternating as the rest)")
    p.add_argument("--buffers", action="store_true",
                   help="EXPLAIN (ANALYZE, BUFFERS) each overview query on both stacks (custom and generic plan)"
                        " and print the buffers touched side by side")
    return p.parse_args(argv)


class Probe:
    """The probe tenant and what its measurements need."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.agent = stack.new_agent()
        self.credential = ""
        self.token = ""
        self.pool: Any = None
        self.proposed: list[str] = []
        self.batch = 0

    async def setup(self) -> None:
        import httpx
        from frontdoor_core.db import create_pool

        await self.stack.create_tenant("probe")
        self.credential = await self.stack.resource_credential()
        self.pool = await create_pool(self.stack.database_url, min_size=1, max_size=4)
        tenant = self._tenant
        async with self.pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO webhook_endpoints (tenant_id, id, url, event_types, created_at, updated_at)"
                " VALUES ($1, 'whe_probe', 'https://hooks.probe.example/frontdoor', '{}', now(), now())", tenant.id)
            await conn.execute(
                "INSERT INTO operation_kinds (tenant_id, name, scopes, default_expiry_seconds, max_expiry_seconds,"
                " perform_endpoint_id, created_at, updated_at)"
                " VALUES ($1, 'order.place', '{}', 900, 3600, 'whe_probe', now(), now())", tenant.id)
        async with httpx.AsyncClient(timeout=30) as client:
            body, headers = self.agent.token_request(tenant.issuer, "probe-user")
            r = await client.post(tenant.token_endpoint, content=body, headers=headers)
            r.raise_for_status()
            self.token = r.json()["access_token"]

    @property
    def _tenant(self) -> Any:
        assert self.stack.tenant is not None
        return self.stack.tenant

    async def propose(self, n: int) -> None:
        """``n`` proposed operations of the probe tenant (a batch of its own IDs) for the confirms."""
        self.batch += 1
        async with self.pool.acquire() as conn, conn.transaction():
            ids = [f"op_probe{self.batch}_{i}" for i in range(n)]
            await conn.execute(
                "INSERT INTO operations (id, tenant_id, kind, client_id, user_id, session_id, state, revision,"
                " expires_at, created_at, updated_at)"
                " SELECT id, $1, 'order.place', $2, 'probe-user', 'ses_probe', 'proposed', 1, now() + interval '1 day',"
                " now(), now() FROM unnest($3::text[]) AS id", self._tenant.id, self.agent.client_id, ids)
            await conn.execute(
                "INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary, user_approval_required,"
                " expires_at, created_at) SELECT id, $1, 1, 'Place an order', true, now() + interval '1 day', now()"
                " FROM unnest($2::text[]) AS id", self._tenant.id, ids)
        self.proposed = ids


async def _http(stack: Stack, n: int, concurrency: int, make: Callable[[], tuple[str, bytes, dict[str, str]]]
                ) -> tuple[Summary, float, int]:
    """``n`` POSTs (``make`` builds each, before the timed window), ``concurrency`` in flight."""
    import httpx

    requests = [make() for _ in range(n)]
    latencies: list[float] = []
    errors = 0
    meter = CpuMeter({"issuer": stack.issuer_proc.pid if stack.issuer_proc else None})
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_keepalive_connections=concurrency)) as client:
        queue = iter(requests)

        async def worker() -> None:
            nonlocal errors
            for url, body, headers in queue:
                t0 = time.perf_counter()
                r = await client.post(url, content=body, headers=headers)
                latencies.append(time.perf_counter() - t0)
                errors += r.status_code != 200

        meter.start()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        used = meter.stop()
    return summarize(latencies), 1000 * used.get("issuer", 0.0) / n, errors


async def _in_process(n: int, call: Callable[[int], Awaitable[Any]]) -> Summary:
    for i in range(min(5, n)):  # warm the pool's prepared statements
        await call(i)
    latencies = []
    for i in range(n):
        t0 = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - t0)
    return summarize(latencies)


async def measure(probe: Probe, args: argparse.Namespace) -> dict[str, tuple[Summary, float | None, int]]:
    """Every path once; answers (latency, issuer CPU ms per request or None, errors) by path."""
    from urllib.parse import urlencode

    from frontdoor_identity.agents import list_agents
    from frontdoor_operations import ledger, overview
    from frontdoor_sessions import session_directory
    from frontdoor_tenancy import audit
    from frontdoor_webhooks.messages import list_messages

    tenant, stack = probe._tenant, probe.stack
    out: dict[str, tuple[Summary, float | None, int]] = {}
    counter = iter(range(10**9))

    def grant() -> tuple[str, bytes, dict[str, str]]:
        body, headers = probe.agent.token_request(tenant.issuer, f"user-{next(counter)}")
        return tenant.token_endpoint, body, headers

    introspect_body = urlencode({"token": probe.token}).encode()
    introspect_headers = {"content-type": "application/x-www-form-urlencoded",
                          "authorization": f"Bearer {probe.credential}"}

    def introspect() -> tuple[str, bytes, dict[str, str]]:
        return f"{tenant.issuer}/oauth/introspect", introspect_body, introspect_headers

    for name, make in (("Session grant", grant), ("introspection", introspect)):
        await _http(stack, 20, args.concurrency, make)  # warm-up: caches, connections
        summary, cpu, errors = await _http(stack, args.requests, args.concurrency, make)
        out[name] = (summary, cpu, errors)

    await probe.propose(args.calls + 5)
    now = datetime.now(UTC)

    fresh = iter(probe.proposed)

    async def confirm(_: int) -> None:
        operation_id = next(fresh)  # each confirm its own proposed operation (warm-up included)
        async with probe.pool.acquire() as conn:
            op, won = await ledger.confirm(conn, tenant.id, operation_id, revision=1, approved_by="user",
                                           via="agent", now=datetime.now(UTC))
            if won is None:
                raise RuntimeError(f"confirm of {operation_id} did not win: {op.state}")

    queries = overview_queries(tenant.id, now)

    async def overview_page(_: int) -> None:
        async with probe.pool.acquire() as conn:
            for query in queries.values():
                await query(conn)

    async def list_pages(_: int) -> None:
        async with probe.pool.acquire() as conn:
            await session_directory.list_sessions(conn, tenant.id)
            await overview.list_filtered(conn, tenant.id, ledger.ListFilters(), now=now)
            await list_agents(conn, tenant.id)
            await audit.list_entries(conn, tenant.id)
            await list_messages(conn, tenant.id)

    for name, call in (("confirm (SQL)", confirm), ("dashboard overview", overview_page),
                       ("dashboard lists", list_pages)):
        out[name] = (await _in_process(args.calls, call), None, 0)
    if getattr(args, "per_query", False):
        for name, query in queries.items():
            async def one(_: int, query: Callable[[Any], Awaitable[Any]] = query) -> None:
                async with probe.pool.acquire() as conn:
                    await query(conn)

            out[f"  {name}"] = (await _in_process(args.calls, one), None, 0)
    return out


def overview_queries(tenant_id: str, now: datetime) -> dict[str, Callable[[Any], Awaitable[Any]]]:
    """The dashboard overview's five repository calls, by name, each taking a connection."""
    from frontdoor_operations import overview

    return {
        "delivery_health": lambda conn: overview.delivery_health(conn, tenant_id, now=now),
        "failed_attempts_by_day": lambda conn: overview.failed_attempts_by_day(conn, tenant_id,
                                                                               since=now - timedelta(days=30)),
        "daily_operations": lambda conn: overview.daily_operations(conn, tenant_id, since=now - timedelta(days=30)),
        "count_by_state": lambda conn: overview.count_by_state(conn, tenant_id, since=now - timedelta(days=1)),
        "count_stuck": lambda conn: overview.count_stuck(conn, tenant_id, now=now),
    }


class _Analyzing:
    """An asyncpg connection stand-in: each statement runs under ``EXPLAIN (ANALYZE, BUFFERS)``, then for real.

    With ``generic`` the statement is PREPAREd and EXECUTEd under ``plan_cache_mode =
    force_generic_plan``: the plan the services' pool settles on once asyncpg's prepared
    statement has run five times (when its cost is not above the custom plans'), planned
    without the arguments' values.
    """

    def __init__(self, conn: Any, generic: bool) -> None:
        self.conn, self.generic = conn, generic
        self.plans: list[dict[str, Any]] = []

    @staticmethod
    def _literal(value: Any) -> str:
        if isinstance(value, datetime):
            return f"'{value.isoformat()}'::timestamptz"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        if isinstance(value, int | float):
            return repr(value)
        raise TypeError(f"no literal for {type(value).__name__}")

    async def _explain(self, sql: str, args: tuple[Any, ...]) -> None:
        options = "ANALYZE, BUFFERS, FORMAT JSON"
        if self.generic:
            await self.conn.execute(f"PREPARE bench_q AS {sql}")
            await self.conn.execute("SET plan_cache_mode = force_generic_plan")
            try:
                params = ", ".join(self._literal(a) for a in args)
                await self.conn.fetchval(f"EXPLAIN ({options}) EXECUTE bench_q({params})")  # warm: plan cached
                raw = await self.conn.fetchval(f"EXPLAIN ({options}) EXECUTE bench_q({params})")
            finally:
                await self.conn.execute("RESET plan_cache_mode")
                await self.conn.execute("DEALLOCATE bench_q")
        else:
            await self.conn.fetchval(f"EXPLAIN ({options}) {sql}", *args)  # warm: catalog caches
            raw = await self.conn.fetchval(f"EXPLAIN ({options}) {sql}", *args)
        doc = json.loads(raw) if isinstance(raw, str) else raw
        self.plans.append(doc[0])

    async def fetch(self, sql: str, *args: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetch(sql, *args)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetchrow(sql, *args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetchval(sql, *args)


def _plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    stack, out = [plan], []
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.get("Plans", [])))
    return out


def _scans(plan: dict[str, Any]) -> str:
    """Each scan node: its type, relation or index, rows x loops, shared buffers hit + read."""
    parts = []
    for node in _plan_nodes(plan):
        if "Relation Name" not in node and "Index Name" not in node:
            continue
        target = node.get("Index Name") or node.get("Relation Name")
        kind = node["Node Type"].replace(" Scan", "").replace("Index Only", "IOS").replace("Bitmap Index", "BIS")
        bufs = node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
        parts.append(f"{kind} {target} {node.get('Actual Rows', 0):.0f}x{node.get('Actual Loops', 0)} b{bufs}")
    return "; ".join(parts)


async def explain_buffers(probes: dict[str, Probe]) -> list[str]:
    """Each overview query under EXPLAIN (ANALYZE, BUFFERS) on each stack: buffers, planning and execution time."""
    now = datetime.now(UTC)
    lines = [f"{'query':<24} {'plan':<8}" + "".join(f" {label + ' buffers':>18} {'plan/exec ms':>13}"
                                                     for label in probes)]
    details: list[str] = []
    for generic in (False, True):
        found: dict[str, list[dict[str, Any]]] = {}
        for probe in probes.values():
            for name, query in overview_queries(probe._tenant.id, now).items():
                async with probe.pool.acquire() as conn:
                    analyzing = _Analyzing(conn, generic)
                    await query(analyzing)
                found.setdefault(name, []).extend(analyzing.plans)
        kind = "generic" if generic else "custom"
        for name, plans in found.items():
            row = f"{name:<24} {kind:<8}"
            for label, doc in zip(probes, plans, strict=True):
                top = doc["Plan"]
                bufs = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
                planning = doc.get("Planning", {})
                pbufs = planning.get("Shared Hit Blocks", 0) + planning.get("Shared Read Blocks", 0)
                row += (f" {bufs:>10} (+{pbufs:>4}p) {doc.get('Planning Time', 0):>6.3f}/"
                        f"{doc.get('Execution Time', 0):<6.3f}")
                details.append(f"    [{kind} {label}] {name}: {_scans(top)}")
            lines.append(row)
    lines.append("  the pools' prepared statements, generic / custom plans so far (pg_prepared_statements):")
    for label, probe in probes.items():
        counts = await _plan_counts(probe.pool, overview_queries(probe._tenant.id, now))
        lines.append(f"    {label}: " + ", ".join(f"{name} {g}/{c}" for name, (g, c) in counts.items()))
    return [*lines, "  scan nodes (rows x loops, buffers):", *details]


async def _plan_counts(pool: Any, queries: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Generic and custom plans of each overview statement, summed over every connection of ``pool``."""
    sql_by_name: dict[str, str] = {}

    class _Capture:
        def __init__(self, name: str) -> None:
            self.name = name

        async def _keep(self, sql: str, *_: Any) -> Any:
            sql_by_name[self.name] = sql
            raise _Captured

        fetch = fetchrow = fetchval = _keep

    for name, query in queries.items():
        with contextlib.suppress(_Captured):
            await query(_Capture(name))
    conns = [await pool.acquire() for _ in range(pool.get_max_size())]  # every connection: each has its own
    try:
        totals = {name: [0, 0] for name in sql_by_name}
        for conn in conns:
            for r in await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"):
                for name, sql in sql_by_name.items():
                    if r["statement"] == sql:
                        totals[name][0] += r["generic_plans"]
                        totals[name][1] += r["custom_plans"]
    finally:
        for conn in conns:
            await pool.release(conn)
    return {name: (g, c) for name, (g, c) in totals.items()}


class _Captured(Exception):
    """Stops an overview query once its SQL is known (`_plan_counts`)."""


def report(base: dict[str, tuple[Summary, float | None, int]], large: dict[str, tuple[Summary, float | None, int]],
           size: dict[str, int], ratios: dict[str, float] | None = None) -> tuple[list[str], bool, int]:
    """Side by side; ``ratios`` (median of per-round ratios) when given, else large p50 / base p50."""
    many = f"{size['tenants']:,} tenants p50"
    lines = [f"{'path':<24} {'1 tenant p50':>13} {'p99':>9}   {many:>18} {'p99':>9}"
             f"   {'ratio p50':>9}  {'issuer CPU/req':>18}"]
    met, errors = True, 0
    for name, (b, b_cpu, b_err) in base.items():
        big, l_cpu, l_err = large[name]
        ratio = ratios[name] if ratios is not None else big.p50_ms / b.p50_ms if b.p50_ms else float("inf")
        ok = ratio <= TARGET_RATIO
        if not name.startswith(" "):  # the overview's queries one by one (--per-query) are a breakdown
            met &= ok
        errors += b_err + l_err
        cpu = f"{b_cpu:.2f} -> {l_cpu:.2f} ms" if b_cpu is not None and l_cpu is not None else ""
        lines.append(f"{name:<24} {fmt_ms(b.p50_ms):>13} {fmt_ms(b.p99_ms):>9}   {fmt_ms(big.p50_ms):>18}"
                     f" {fmt_ms(big.p99_ms):>9}   {ratio:>8.2f}x  {cpu:>18}  {'ok' if ok else 'ABOVE 1.2'}")
    return lines, met, errors


async def explain(probe: Probe) -> list[str]:
    from frontdoor_devstack.query_plans import exercise_hot_paths, sequential_scans

    async with probe.pool.acquire() as conn:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        tx = conn.transaction()
        await tx.start()
        try:
            plans = await exercise_hot_paths(conn)
        finally:
            await tx.rollback()
    lines = []
    for p in plans:
        scans = [f"{n['Node Type']} {n.get('Index Name') or n.get('Relation Name', '')}" for n in p.nodes()
                 if "Relation Name" in n or "Index Name" in n]
        lines.append(f"  [{p.path}] {p.sql[:100]}\n      {'; '.join(scans)}")
    async with probe.pool.acquire() as conn:
        rows = {r["relname"]: r["reltuples"] for r in await conn.fetch(
            "SELECT relname, reltuples FROM pg_class WHERE relkind IN ('r', 'i')")}
    # A Seq Scan of an empty table (a future month's partition, DEFAULT) or of a few hundred
    # rows is the right plan; only the others count.
    small = frozenset(name for name, tuples in rows.items() if tuples < 1000)
    seq = sequential_scans(plans, ignore=small)
    lines.append(f"  full scans of tables or indexes with 1,000+ rows: {len(seq)}")
    lines += [f"    {path}: Seq Scan on {table}: {sql[:120]}" for path, table, sql in seq]
    return lines


Measured = dict[str, tuple[Summary, float | None, int]]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def combine(rounds: list[Measured]) -> Measured:
    """One figure per path from several rounds: the median of each round's p50/p99/CPU, errors summed."""
    out: Measured = {}
    for name in rounds[0]:
        summaries = [r[name][0] for r in rounds]
        cpus = [c for c in (r[name][1] for r in rounds) if c is not None]
        out[name] = (Summary(n=sum(x.n for x in summaries), mean_ms=_median([x.mean_ms for x in summaries]),
                             p50_ms=_median([x.p50_ms for x in summaries]),
                             p99_ms=_median([x.p99_ms for x in summaries]),
                             max_ms=max(x.max_ms for x in summaries)),
                     _median(cpus) if cpus else None, sum(r[name][2] for r in rounds))
    return out


async def run(small: Stack, large: Stack, args: argparse.Namespace) -> int:
    """The probe tenant of a one-tenant stack and its twin in the seeded stack, measured in alternation.

    Both stacks (each its own PostgreSQL, Redis and issuer) stay up together, so every round
    measures one, then the other, within the same minutes: what the machine's other load does
    to the figures it does to both (the baseline is no longer taken before a seed that runs
    for minutes, at another time of the machine's day). The order alternates per round; each
    path's figure is the median over the rounds, and the ratio is the median of the rounds'
    own ratios.
    """
    from frontdoor_devstack.scale_seed import ScalePlan, seed

    size = dict(SIZES["full" if args.full else "quick" if args.quick else "default"])
    size.update({k: getattr(args, k) for k in size if getattr(args, k) is not None})
    base_probe, large_probe = Probe(small), Probe(large)
    await base_probe.setup()
    await large_probe.setup()
    print(f"scale  (probe tenant '{base_probe._tenant.slug}' in a one-tenant stack and in the seeded one, each"
          f" with its own PostgreSQL, Redis and issuer under granian with 1 worker; {args.rounds} alternating"
          f" rounds of {args.requests} HTTP requests x {args.concurrency} in flight and {args.calls} in-process"
          " calls; figures from a shared machine are noisy: read the ratios)")
    print(f"seeding {size['tenants']:,} tenants, {size['sessions']:,} Sessions, {size['operations']:,} operations,"
          f" {size['attempts']:,} delivery attempts ...")
    import asyncpg

    started = time.perf_counter()
    conn = await asyncpg.connect(large.database_url)
    try:
        plan = ScalePlan(**size)
        await seed(conn, plan, template_tenant_id=large_probe._tenant.id, kek_value=large.kek_value)
        db_size = await conn.fetchval("SELECT pg_size_pretty(pg_database_size(current_database()))")
    finally:
        await conn.close()
    print(f"seeded in {time.perf_counter() - started:.0f} s; database {db_size}")
    conn = await asyncpg.connect(small.database_url)
    try:
        # The seed gives the history's months their partitions of webhook_attempts: the
        # baseline gets the same (the planner's cost grows with partitions, not tenants), and
        # ANALYZE as the seed ends, so both stacks plan from statistics.
        from frontdoor_webhooks.attempt_partitions import ensure_partitions

        now = datetime.now(UTC)
        await ensure_partitions(conn, now - timedelta(days=plan.days + 1), now)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()
    warm = argparse.Namespace(**{**vars(args), "requests": max(args.requests // 4, 20), "calls": max(args.calls // 4, 10)})
    for probe in (base_probe, large_probe):  # discarded: imports, caches, prepared statements and buffers warm
        await measure(probe, warm)
    base_rounds: list[Measured] = []
    large_rounds: list[Measured] = []
    for i in range(args.rounds):
        order = ((base_probe, base_rounds), (large_probe, large_rounds))
        for probe, rounds in order if i % 2 == 0 else order[::-1]:
            rounds.append(await measure(probe, args))
    ratios = {name: _median([lr[name][0].p50_ms / br[name][0].p50_ms if br[name][0].p50_ms else float("inf")
                             for br, lr in zip(base_rounds, large_rounds, strict=True)])
              for name in base_rounds[0]}
    lines, met, errors = report(combine(base_rounds), combine(large_rounds), size, ratios)
    print("\n".join(lines))
    print(f"target: every ratio <= {TARGET_RATIO} ({'met' if met else 'MISSED'}); errors {errors}")
    if args.buffers:
        print("overview queries under EXPLAIN (ANALYZE, BUFFERS): shared buffers hit + read by the executor"
              " (+ by the planner), planning / execution ms")
        print("\n".join(await explain_buffers({"1 tenant": base_probe, f"{size['tenants']:,} tenants": large_probe})))
    if args.explain:
        print("\n".join(await explain(large_probe)))
    await base_probe.pool.close()
    await large_probe.pool.close()
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    install_signal_handlers()
    args = parse_args(argv)
    # Databases and migrations start outside the event loop (they run their own).
    with Stack() as small, Stack() as large:
        small.start_issuer(workers=1)
        large.start_issuer(workers=1)
        return asyncio.run(run(small, large, args))


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        raise SystemExit(130) from None
