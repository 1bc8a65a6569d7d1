"""Introspections per second at the real issuer, with a real load generator (Debian ``wrk``).

The issuer runs under granian (one worker), a real Session Token and resource-server
credential are sent by ``wrk`` with a Lua script (POST form, keep-alive connections), and
the issuer's CPU is metered. Beside it, the floor of the same run: the reads introspection
makes (the Session row and the agent policy, by primary key) issued straight to PostgreSQL
with asyncpg, as many in flight as wrk's connections.

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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--connections", type=int, default=32)
    args = p.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    install_signal_handlers()
    with Stack() as stack:
        issuer, token, credential = asyncio.run(_token(stack))
        assert stack.tenant is not None
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(_LUA % (token, credential))
        meter = CpuMeter(stack.pids)
        meter.start()
        out = subprocess.run([wrk, "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "--latency", "-s",
                              script.name, f"{issuer}/oauth/introspect"], capture_output=True, text=True, check=True)
        cpu = meter.stop()
        Path(script.name).unlink()
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out.stdout).group(1))  # type: ignore[union-attr]
        p50 = re.search(r"50%\s+(\S+)", out.stdout)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out.stdout)
        floor = asyncio.run(_floor(stack.database_url, stack.tenant.id, min(args.seconds, 5), args.connections))
    issuer_cpu = cpu.get("issuer (granian)", 0.0)
    total = rps * args.seconds
    result = {"rps": rps, "p50": p50.group(1) if p50 else "?", "non_2xx": int(non2xx.group(1)) if non2xx else 0,
              "issuer_cpu_ms": 1000 * issuer_cpu / total if total else 0.0, "floor_rps": floor}
    print("introspection_wrk  (wrk -t1, keep-alive, one issuer worker under granian)")
    print(f"  introspections/s      : {rps:,.0f}  (p50 {result['p50']}, non-2xx {result['non_2xx']})")
    print(f"  issuer CPU per call   : {result['issuer_cpu_ms']:.2f} ms")
    print(f"  floor, same PG reads  : {floor:,.0f}/s  (asyncpg, {args.connections} in flight)")
    print(f"  ratio to the floor    : {rps / floor:.2f}")
    return result


if __name__ == "__main__":
    main()
