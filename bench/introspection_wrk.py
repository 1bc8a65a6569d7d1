"""Introspections per second at the real issuer, with a real load generator (Debian ``wrk``).

The issuer runs under granian (one worker), a real Session Token and resource-server
credential are sent by ``wrk`` with a Lua script (POST form, keep-alive connections), and
the issuer's CPU is metered: once over one connection (latency), then over ``--connections``
(throughput). Beside it, the floors of the same run: the read a cached introspection makes
(one Redis ``MGET`` of the tenant's head and the Session's entry), and the reads it made
before the cache (the Session row and the agent policy by primary key, asyncpg), as many
in flight as wrk's connections.

Needs the ``wrk`` binary (Debian: ``apt-get install -y wrk``); nothing else to install.

    python bench/introspection_wrk.py [--seconds 10] [--connections 32]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import re
import shutil
import subprocess
import tempfile
import time
from typing import Any

from bench._common import CpuMeter, Stack, install_signal_handlers

_LUA = """
wrk.method = "POST"
wrk.body = "token=%s&token_type_hint=access_token"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Bearer %s"
"""


async def _token(stack: Stack) -> tuple[str, str, str]:
    import httpx

    tenant = await stack.create_tenant()
    agent = stack.new_agent()
    credential = await stack.resource_credential()
    stack.start_issuer()
    async with httpx.AsyncClient(timeout=30) as client:
        body, headers = agent.token_request(tenant.issuer, "user-1")
        r = await client.post(tenant.token_endpoint, content=body, headers=headers)
        r.raise_for_status()
        token = r.json()["access_token"]
        check = await client.post(f"{tenant.issuer}/oauth/introspect", data={"token": token},
                                  headers={"Authorization": f"Bearer {credential}"})
        if check.status_code != 200 or check.json().get("active") is not True:
            raise RuntimeError(f"introspection is not active: {check.status_code} {check.text[:200]}")
    return tenant.issuer, token, credential


async def _floor(database_url: str, tenant_id: str, seconds: float, concurrency: int) -> float:
    """The reads introspection made before the cache: the Session row and the agent policy."""
    import asyncpg

    pool = await asyncpg.create_pool(database_url, min_size=concurrency, max_size=concurrency)
    session_id = await pool.fetchval("SELECT id FROM pap_sessions WHERE tenant_id = $1 LIMIT 1", tenant_id)
    done = 0
    stop = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        async with pool.acquire() as conn:
            while time.monotonic() < stop:
                await conn.fetchrow("SELECT * FROM pap_sessions WHERE tenant_id = $1 AND id = $2", tenant_id, session_id)
                await conn.fetchrow("SELECT * FROM agent_policies WHERE tenant_id = $1", tenant_id)
                done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await pool.close()
    return done / elapsed


async def _redis_floor(redis_url: str, tenant_id: str, seconds: float, concurrency: int) -> tuple[float, float]:
    """The read a cached introspection makes: one ``MGET`` of the head and the entry.

    Returns (reads/s with ``concurrency`` in flight, p50 ms of one at a time).
    """
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    keys = [key async for key in client.scan_iter(match=f"fd:{{{tenant_id}}}:introspection:*")]
    keys = keys or [f"fd:{{{tenant_id}}}:introspection:head"]
    one_at_a_time = []
    for _ in range(2000):
        t0 = time.perf_counter()
        await client.mget(keys)
        one_at_a_time.append(time.perf_counter() - t0)
    done = 0
    stop = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < stop:
            await client.mget(keys)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await client.aclose()
    one_at_a_time.sort()
    return done / elapsed, 1000 * one_at_a_time[len(one_at_a_time) // 2]


def _wrk(wrk: str, script: str, url: str, connections: int, seconds: int) -> tuple[float, str, int]:
    out = subprocess.run([wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = re.search(r"50%\s+(\S+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p50.group(1) if p50 else "?", int(non2xx.group(1)) if non2xx else 0


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=32)
    args = p.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed (Debian/Ubuntu: apt-get install -y wrk; macOS: brew install wrk)")
    install_signal_handlers()
    with Stack() as stack:
        issuer, token, credential = asyncio.run(_token(stack))
        assert stack.tenant is not None
        url = f"{issuer}/oauth/introspect"
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(_LUA % (token, credential))
        try:
            _, p50_one, _ = _wrk(wrk, script.name, url, 1, min(args.seconds, 5))  # latency: one connection
            meter = CpuMeter(stack.pids)
            meter.start()
            started = time.monotonic()
            rps, p50, non2xx = _wrk(wrk, script.name, url, args.connections, args.seconds)
            wall = time.monotonic() - started
            cpu = meter.stop()
        finally:
            Path(script.name).unlink()
        floor = asyncio.run(_floor(stack.database_url, stack.tenant.id, min(args.seconds, 5), args.connections))
        redis_rps, redis_p50 = asyncio.run(_redis_floor(stack.redis_url, stack.tenant.id, min(args.seconds, 5),
                                                        args.connections))
    issuer_cpu = cpu.get("issuer (granian)", 0.0)
    total = rps * args.seconds
    per_core = total / issuer_cpu if issuer_cpu else 0.0
    result = {"rps": rps, "p50": p50, "p50_one": p50_one, "non_2xx": non2xx,
              "issuer_cpu_ms": 1000 * issuer_cpu / total if total else 0.0, "per_core": per_core,
              "floor_rps": floor, "redis_floor_rps": redis_rps, "redis_p50_ms": redis_p50,
              "other_cpus": cpu.get("other processes", 0.0) / wall if wall else 0.0}
    print("introspection_wrk  (wrk -t1, keep-alive, one issuer worker under granian)")
    print(f"  one connection        : p50 {p50_one} per introspection (target <= 1.0 ms over loopback)")
    print(f"  introspections/s      : {rps:,.0f} with {args.connections} connections  (p50 {p50}, non-2xx {non2xx})")
    print(f"  issuer CPU per call   : {result['issuer_cpu_ms']:.2f} ms  = {per_core:,.0f} introspections/s per issuer"
          " core (target >= 3,000)")
    print(f"  floor, Redis MGET     : {redis_rps:,.0f}/s  ({args.connections} in flight; one at a time p50"
          f" {redis_p50:.3f} ms)")
    print(f"  floor, same PG reads  : {floor:,.0f}/s  (asyncpg, {args.connections} in flight; the reads before the"
          " cache)")
    print(f"  ratio to the floors   : {rps / redis_rps:.2f} of Redis, {rps / floor:.2f} of PostgreSQL")
    if result["other_cpus"] > 0.2:
        print(f"  NOTE: other processes kept {result['other_cpus']:.2f} CPUs busy during the timed window: figures"
              " are noisy")
    return result


if __name__ == "__main__":
    main()
