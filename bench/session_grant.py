"""Session starts per second at the token endpoint, beside the floor measured in the same run.

Endpoint: the issuer under granian (as many workers as ``make run`` starts:
``FRONTDOOR_ISSUER_WORKERS``, by default one per CPU) on real PostgreSQL and Redis, called over
loopback sockets by N keep-alive connections: the Debian ``wrk`` binary with a Lua script
holding the pre-signed requests (each sent once) when ``wrk`` is on PATH, else (or with
``--load-generator httpx``) ``httpx.AsyncClient`` connections in this process, which cost
~0.8 ms of CPU per request on the same cores as the issuer. Every request is
signed before the timed window (client assertion, Session assertion and DPoP proof, each
with its own ``jti``), so the load generator only sends and reads while it is timed. The
agent's metadata is fetched once during the warm-up and then served from the issuer's
cache.

Floor: in this process, a loop doing only what the endpoint cannot avoid: verify the
client assertion, the DPoP proof and the Session assertion
(``frontdoor_protocol.verify_*``), three replay-cache ``SET NX`` writes, one ``INSERT``
into ``pap_sessions`` and the token's signature (``mint_session_token`` with the tenant's
key), on a bare asyncpg pool and Redis client. It runs sequentially and with the same
concurrency as the endpoint; the ratio uses the faster of the two.

Floor behind granian (a second baseline, printed for information; the target stays the ratio
to the floor above): the floor's very work (:meth:`Floor.one`) as a bare ASGI app under the same
granian, workers and load generator, so that what the issuer costs above a minimal HTTP server
doing the unavoidable work can be read.

In process (``--in-process``): the issuer's very ASGI app (``frontdoor_issuer.asgi:app``, the
lean token route) called in this process without an HTTP server, with the same concurrency,
alternating with the floor loop: this process's CPU per grant against the floor's. What the
endpoint costs above that is the HTTP server (granian's runtime), not the grant's code.

    python bench/session_grant.py [--requests 3000] [--concurrency 8] [--load-generator auto|wrk|httpx]
                                  [--profile] [--in-process]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import re
import secrets
import shutil
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from bench._common import (
    KEYCLOAK_GRANTS_PER_VCPU,
    Agent,
    CpuMeter,
    Stack,
    Summary,
    Tenant,
    find_py_spy,
    install_signal_handlers,
    py_spy_record,
    rate,
    summarize,
    summarize_collapsed,
)

TARGET_RATIO = 0.6
"""Quality bar: endpoint >= 60 % of the floor, by rate and by CPU."""
TARGET_CPU_RATIO = 0.6


def default_workers() -> int:
    """The issuer's workers under ``make run``: ``FRONTDOOR_ISSUER_WORKERS``, or one per CPU."""
    from frontdoor_issuer.serve import worker_count

    try:
        configured = int(os.environ.get("FRONTDOOR_ISSUER_WORKERS", "0"))
    except ValueError:
        configured = 0
    return worker_count(configured)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=3000, help="timed Session starts at the endpoint")
    p.add_argument("--batch", type=int, default=1500,
                   help="requests signed per batch (DPoP proofs are accepted for 60 s, so large runs sign in batches"
                        " outside the timed window)")
    p.add_argument("--warmup", type=int, default=200, help="untimed requests first (metadata fetch, caches, pools)")
    p.add_argument("--concurrency", type=int, default=8, help="keep-alive connections to the endpoint")
    p.add_argument("--load-generator", choices=("auto", "wrk", "httpx"), default="auto",
                   help="what sends the timed requests: the Debian `wrk` binary with a Lua script of the pre-signed"
                        " requests, or httpx clients in this process (auto: wrk when it is on PATH)")
    p.add_argument("--workers", type=int, default=None,
                   help="granian workers (default: as `make run`, FRONTDOOR_ISSUER_WORKERS or one per CPU)")
    p.add_argument("--floor-ops", type=int, default=2000, help="iterations of each floor loop")
    p.add_argument("--profile", action="store_true",
                   help="cProfile the floor and, if py-spy is installed ($PY_SPY or PATH), sample the issuer")
    p.add_argument("--in-process", action="store_true",
                   help="also call the issuer's ASGI app in this process (no HTTP server), alternating with the floor")
    p.add_argument("--quick", action="store_true", help="small counts, for a quick look")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.warmup, args.floor_ops = min(args.requests, 600), min(args.warmup, 50), 400
    if args.workers is None:
        args.workers = default_workers()
    if args.load_generator == "auto":
        args.load_generator = "wrk" if shutil.which("wrk") else "httpx"
    elif args.load_generator == "wrk" and not shutil.which("wrk"):
        p.error("--load-generator wrk needs the wrk binary on PATH (Debian: apt-get install -y wrk)")
    if args.requests < 1 or args.concurrency < 1 or args.batch < 1 or args.floor_ops < 1:
        p.error("counts must be positive")
    return args

# --------------------------------------------------------------------------- endpoint


@dataclass
class Fired:
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    first_error: str = ""
    wrk_batches: list[dict[str, float]] = field(default_factory=list)  # wrk's own latency figures, per batch

    @property
    def count(self) -> int:
        return sum(self.statuses.values())

    def latency(self) -> Summary:
        if not self.wrk_batches:
            return summarize(self.latencies)
        n = sum(int(b["n"]) for b in self.wrk_batches)
        return Summary(n=n, mean_ms=sum(b["mean_ms"] * b["n"] for b in self.wrk_batches) / max(n, 1),
                       p50_ms=sum(b["p50_ms"] for b in self.wrk_batches) / len(self.wrk_batches),
                       p99_ms=max(b["p99_ms"] for b in self.wrk_batches),
                       max_ms=max(b["max_ms"] for b in self.wrk_batches))

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status != 200)


async def _fire(clients: list[Any], url: str, requests: list[tuple[bytes, dict[str, str]]], out: Fired) -> None:
    queue = iter(requests)

    async def worker(client: Any) -> None:
        for body, headers in queue:  # one shared iterator: each request is sent once
            t0 = time.perf_counter()
            try:
                r = await client.post(url, content=body, headers=headers)
                status, text = r.status_code, r.text
            except Exception as exc:
                status, text = 599, repr(exc)
            out.latencies.append(time.perf_counter() - t0)
            out.statuses[status] += 1
            if status != 200 and not out.first_error:
                out.first_error = f"{status} {text[:300]}"

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    out.seconds += time.perf_counter() - t0


def _sign(agent: Agent, issuer: str, n: int) -> list[tuple[bytes, dict[str, str]]]:
    return [agent.token_request(issuer, f"user-{secrets.token_hex(6)}") for _ in range(n)]


def _lua_string(value: bytes) -> str:
    """A Lua string literal of ``value`` (printable ASCII as is, anything else as a decimal escape)."""
    return '"' + "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:03d}" for c in value) + '"'


_WRK_LUA = """
local n = #reqs
local i = 0
local ok, bad = 0, 0
local first = nil
local checked = false
function request()
  if not checked then  -- wrk calls request() once on its first thread to check the script: never sent
    checked = true
    return extra
  end
  i = i + 1
  if i <= n then return reqs[i] end
  return extra  -- once every Session start is sent: GET /healthz until the last answer arrives
end
function response(status, headers, body)
  if status == 200 and string.find(body, '"access_token"', 1, true) then
    ok = ok + 1
  elseif status ~= 200 or string.find(body, '"error"', 1, true) then
    bad = bad + 1
    if first == nil then first = status .. " " .. string.sub(body, 1, 300) end
  else
    return  -- a /healthz answer
  end
  if ok + bad == n then
    io.write(string.format("WRKCOUNT %d %d\\n", ok, bad))
    if first ~= nil then io.write("WRKFIRST " .. string.gsub(first, "\\n", " ") .. "\\n") end
    io.flush()
    wrk.thread:stop()
  end
end
function done(summary, latency, requests)
  io.write(string.format("WRKDONE %d %d %.1f %d %d %d\\n", summary.duration, summary.requests, latency.mean,
    latency:percentile(50), latency:percentile(99), latency.max))
  io.flush()
end
"""


def _wrk_script(path: str, requests: list[tuple[bytes, dict[str, str]]]) -> str:
    """wrk's Lua script sending each pre-signed request once, in order, on one wrk thread."""
    lines = ["reqs = {}"]
    for body, headers in requests:
        fields = ", ".join(f"[{_lua_string(k.encode())}] = {_lua_string(v.encode())}" for k, v in headers.items())
        lines.append(f'reqs[#reqs + 1] = wrk.format("POST", {_lua_string(path.encode())}, {{{fields}}}, '
                     f"{_lua_string(body)})")
    lines.append('extra = wrk.format("GET", "/healthz")')
    return "\n".join(lines) + _WRK_LUA


def _fire_wrk(stack: Stack, url: str, requests: list[tuple[bytes, dict[str, str]]], concurrency: int,
              out: Fired) -> float:
    """Send ``requests`` with wrk (one thread, ``concurrency`` keep-alive connections).

    wrk has no request count: the script sends each request once, then ``GET /healthz`` on the
    connections still open until the last Session start is answered, prints the counts, and wrk
    is stopped (SIGINT: it then prints its summary). The window is wrk's own duration; its
    latency figures include those few ``/healthz`` calls (fewer than ``concurrency``). Returns
    wrk's CPU seconds."""
    parts = urlsplit(url)
    script = stack.root / "session_grant.lua"
    script.write_text(_wrk_script(parts.path, requests))
    proc = subprocess.Popen(["wrk", "-t1", f"-c{concurrency}", f"-d{max(60, len(requests) // 20)}s", "--timeout", "30s", "-s", str(script),
                             f"{parts.scheme}://{parts.netloc}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    output: list[str] = []
    cpu = 0.0
    try:
        for line in proc.stdout:
            output.append(line)
            if line.startswith("WRKCOUNT"):
                proc.send_signal(signal.SIGINT)
        _, _, usage = os.wait4(proc.pid, 0)  # wrk's own CPU, so that it is not counted as another process's
        proc.returncode = 0
        cpu = usage.ru_utime + usage.ru_stime
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(output)
    counts = re.search(r"^WRKCOUNT (\d+) (\d+)$", text, re.M)
    done = re.search(r"^WRKDONE (\d+) (\d+) ([\d.]+) (\d+) (\d+) (\d+)$", text, re.M)
    if counts is None or done is None:
        raise RuntimeError(f"wrk did not finish its requests:\n{text[-2000:]}")
    ok, bad = int(counts.group(1)), int(counts.group(2))
    out.statuses[200] += ok
    if bad:
        out.statuses[0] += bad  # not a status: wrk's script counts refusals, the first one is kept
        first = re.search(r"^WRKFIRST (.*)$", text, re.M)
        if first and not out.first_error:
            out.first_error = first.group(1)
    micro = [float(g) for g in done.groups()]
    out.seconds += micro[0] / 1e6
    out.wrk_batches.append({"n": ok + bad, "mean_ms": micro[2] / 1000, "p50_ms": micro[3] / 1000,
                            "p99_ms": micro[4] / 1000, "max_ms": micro[5] / 1000})
    return cpu


async def run_endpoint(stack: Stack, agent: Agent, args: argparse.Namespace,
                       spy_out: Path | None) -> tuple[Fired, dict[str, float], list[str]]:
    import httpx

    tenant = stack.tenant
    assert tenant is not None
    url = tenant.token_endpoint
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    clients = [httpx.AsyncClient(limits=limits, timeout=30.0) for _ in range(args.concurrency)]
    try:
        warm = Fired()
        await _fire(clients[:1], url, _sign(agent, tenant.issuer, 1), warm)  # fetches the agent's metadata
        await _fire(clients, url, _sign(agent, tenant.issuer, args.warmup), warm)
        if warm.errors:
            raise RuntimeError(f"warm-up failed: {warm.first_error}\n{stack.issuer_log_tail()}")
        timed = Fired()
        cpu: Counter[str] = Counter()
        remaining = args.requests
        while remaining:
            size = min(args.batch, remaining)
            remaining -= size
            prepared = _sign(agent, tenant.issuer, size)  # outside the timed window
            meter = CpuMeter(stack.pids)
            meter.start()
            if args.load_generator == "wrk":
                wrk_cpu = _fire_wrk(stack, url, prepared, args.concurrency, timed)
                used = meter.stop()
                used["load generator"] += wrk_cpu  # wrk, a child of this process, not "other processes"
                used["other processes"] = max(used["other processes"] - wrk_cpu, 0.0)
            else:
                await _fire(clients, url, prepared, timed)
                used = meter.stop()
            cpu.update(used)
        spy_lines: list[str] = []
        if spy_out is not None and stack.issuer_proc is not None:
            # An extra, untimed batch under the sampler, so that it never slows the timed one.
            prepared = _sign(agent, tenant.issuer, min(args.batch, args.requests))
            with py_spy_record(stack.issuer_proc.pid, spy_out, seconds=600):
                await _fire(clients, url, prepared, Fired())
            spy_lines = summarize_collapsed(spy_out)
        return timed, dict(cpu), spy_lines
    finally:
        for c in clients:
            await c.aclose()

# --------------------------------------------------------------------------- floor


@dataclass
class FloorItem:
    client_assertion: str
    assertion: str
    proof: str


class Floor:
    """The endpoint's unavoidable work, without HTTP, framework, caches or extra queries."""

    def __init__(self, stack: Stack, agent: Agent) -> None:
        from joserfc.jwk import KeySet

        assert stack.tenant is not None
        self.stack = stack
        self.tenant: Tenant = stack.tenant
        self.agent = agent
        self.keys = KeySet.import_key_set(agent.jwks())  # type: ignore[arg-type]
        self.pool: Any = None
        self.redis: Any = None
        self.signer: Any = None

    async def open(self, size: int) -> None:
        import redis.asyncio as aioredis
        from frontdoor_core.db import create_pool
        from frontdoor_tenancy.credentials.key_encryption import Kek
        from frontdoor_tenancy.signing_keys import load_signer

        # The services' own pool (its release needs no round trip), so the floor does not pay more.
        self.pool = await create_pool(self.stack.database_url, min_size=size, max_size=size)
        self.redis = aioredis.from_url(self.stack.redis_url)
        async with self.pool.acquire() as conn:
            self.signer = await load_signer(conn, self.tenant.id, Kek.from_env_value(self.stack.kek_value),
                                            datetime.now(UTC))

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
        if self.pool is not None:
            await self.pool.close()

    def items(self, n: int) -> list[FloorItem]:
        issuer = self.tenant.issuer
        return [FloorItem(self.agent.client_assertion(issuer), self.agent.session_assertion(issuer, f"u-{i}"),
                          self.agent.dpop("POST", self.tenant.token_endpoint)) for i in range(n)]

    def crypto(self, item: FloorItem, now: int) -> tuple[Any, Any, Any, str]:
        """The three signature checks and the token's signature (no I/O)."""
        from frontdoor_protocol.client_assertion import verify_client_assertion
        from frontdoor_protocol.dpop_proof import verify_dpop_proof
        from frontdoor_protocol.session_assertion import verify_session_assertion
        from frontdoor_protocol.session_token import Confirmation, SessionTokenClaims, mint_session_token

        client_id, issuer = self.agent.client_id, self.tenant.issuer
        ca = verify_client_assertion(item.client_assertion, client_id=client_id, issuer=issuer, keys=self.keys,
                                     now=now)
        proof = verify_dpop_proof(item.proof, method="POST", url=self.tenant.token_endpoint, now=now,
                                  access_token=None)
        sa = verify_session_assertion(item.assertion, client_id=client_id, issuer=issuer, keys=self.keys, now=now)
        claims = SessionTokenClaims(iss=issuer, sub=sa.user_id, aud=issuer, client_id=client_id,
                                    sid="ses_" + secrets.token_urlsafe(12), jti=secrets.token_urlsafe(16), iat=now,
                                    exp=now + 3600, cnf=Confirmation(jkt=proof.jkt))
        return ca, proof, sa, mint_session_token(claims, self.signer.key, self.signer.kid)

    async def one(self, item: FloorItem, replay: Any) -> str:
        from frontdoor_protocol.client_assertion import verify_client_assertion
        from frontdoor_protocol.dpop_proof import verify_dpop_proof
        from frontdoor_protocol.session_assertion import verify_session_assertion
        from frontdoor_protocol.session_token import Confirmation, SessionTokenClaims, mint_session_token
        from frontdoor_sessions.session_store import create_session

        now_dt = datetime.now(UTC)
        now = int(now_dt.timestamp())
        client_id, issuer, tenant_id = self.agent.client_id, self.tenant.issuer, self.tenant.id
        ca = verify_client_assertion(item.client_assertion, client_id=client_id, issuer=issuer, keys=self.keys,
                                     now=now)
        proof = verify_dpop_proof(item.proof, method="POST", url=self.tenant.token_endpoint, now=now,
                                  access_token=None)
        sa = verify_session_assertion(item.assertion, client_id=client_id, issuer=issuer, keys=self.keys, now=now)
        scope = f"{tenant_id}\x00{client_id}"
        ok = (await replay.claim("client-assertion", scope, ca.jti, ttl_s=ca.exp - now + 60)
              and await replay.claim("session-assertion", scope, sa.jti, ttl_s=sa.exp - now + 60)
              and await replay.claim("dpop", f"{tenant_id}\x00{proof.jkt}", proof.jti, ttl_s=120))
        if not ok:
            raise RuntimeError("a floor jti was not fresh")
        async with self.pool.acquire() as conn:
            session = await create_session(conn, tenant_id, client_id, sa.user_id, now=now_dt)
        claims = SessionTokenClaims(iss=issuer, sub=sa.user_id, aud=issuer, client_id=client_id, sid=session.id,
                                    jti=secrets.token_urlsafe(16), iat=now, exp=now + 3600,
                                    cnf=Confirmation(jkt=proof.jkt))
        return mint_session_token(claims, self.signer.key, self.signer.kid)

    async def run(self, items: list[FloorItem], concurrency: int) -> float:
        """Seconds to process ``items`` with ``concurrency`` loops."""
        from frontdoor_sessions.replay_cache import ReplayCache

        replay = ReplayCache(self.redis)
        queue = iter(items)

        async def loop() -> None:
            for item in queue:
                await self.one(item, replay)

        t0 = time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(concurrency)))
        return time.perf_counter() - t0


def crypto_floor(floor: Floor, items: list[FloorItem]) -> float:
    """Seconds for the signature work alone on ``items`` (3 verifies + 1 signature each)."""
    t0 = time.perf_counter()
    for item in items:
        floor.crypto(item, int(time.time()))
    return time.perf_counter() - t0


async def run_floor(stack: Stack, agent: Agent, args: argparse.Namespace) -> dict[str, Any]:
    floor = Floor(stack, agent)
    await floor.open(max(args.concurrency, 1))
    try:
        warm = floor.items(50)
        await floor.run(warm, 1)
        seq_items = floor.items(args.floor_ops)
        seq_s = await floor.run(seq_items, 1)
        conc_items = floor.items(args.floor_ops)
        meter = CpuMeter(stack.pids)
        meter.start()
        conc_s = await floor.run(conc_items, args.concurrency)
        used = meter.stop()
        other_cpus = used["other processes"] / conc_s
        floor_cpu_ms = 1000 * sum(used[k] for k in ("load generator", "postgres", "redis") if k in used) / args.floor_ops
        crypto_s = crypto_floor(floor, floor.items(min(args.floor_ops, 1000)))
        crypto_n = min(args.floor_ops, 1000)
        profile_lines: list[str] = []
        if args.profile:
            prof = cProfile.Profile()
            items = floor.items(min(args.floor_ops, 1000))
            prof.enable()
            await floor.run(items, 1)
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
            profile_lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()][3:]
        return {
            "sequential": rate(args.floor_ops, seq_s),
            "concurrent": rate(args.floor_ops, conc_s),
            "crypto_only": rate(crypto_n, crypto_s),
            "other_cpus": other_cpus,
            "cpu_ms_per_op": floor_cpu_ms,
            "profile": profile_lines,
        }
    finally:
        await floor.close()

# --------------------------------------------------------------------------- the floor behind granian


class FloorApp:
    """ASGI: the floor's work (:meth:`Floor.one`) for each ``POST``, under granian: the second baseline.

    Its configuration (databases, KEK, tenant, the agent's keys) comes from ``$SESSION_GRANT_FLOOR``
    (JSON, set by :func:`run_floor_app`); the lifespan opens the floor's pool and Redis client."""

    def __init__(self) -> None:
        self.floor: Floor | None = None
        self.replay: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        status, body = 200, b'{"status":"ok"}'
        if scope["method"] == "POST":
            from urllib.parse import parse_qs

            form = parse_qs(b"".join(chunks).decode())
            dpop = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"dpop"), "")
            assert self.floor is not None
            try:
                token = await self.floor.one(FloorItem(form["client_assertion"][0], form["assertion"][0], dpop),
                                             self.replay)
                body = b'{"access_token":"' + token.encode() + b'","token_type":"DPoP"}'
            except Exception as exc:
                status, body = 500, b'{"error":"' + type(exc).__name__.encode() + b'"}'
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        import json
        from types import SimpleNamespace

        from frontdoor_sessions.replay_cache import ReplayCache

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                cfg = json.loads(os.environ["SESSION_GRANT_FLOOR"])
                stack = SimpleNamespace(tenant=Tenant(**cfg["tenant"]), database_url=cfg["database_url"],
                                        redis_url=cfg["redis_url"], kek_value=cfg["kek_value"])
                agent = SimpleNamespace(client_id=cfg["client_id"], jwks=lambda jwks=cfg["jwks"]: jwks)
                self.floor = Floor(stack, agent)  # type: ignore[arg-type]
                await self.floor.open(cfg["pool"])
                self.replay = ReplayCache(self.floor.redis)
                await send({"type": "lifespan.startup.complete"})
            else:
                if self.floor is not None:
                    await self.floor.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


floor_app = FloorApp()


def _start_floor_app(stack: Stack, agent: Agent, args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    """granian serving :data:`floor_app` (the issuer's workers and flags) on a free port, once it answers."""
    import json

    from bench._common import free_port, stop_process_group

    tenant = stack.tenant
    assert tenant is not None
    root = Path(__file__).resolve().parent.parent
    base = f"http://127.0.0.1:{free_port()}"
    cfg = {"tenant": {"id": tenant.id, "slug": tenant.slug, "issuer": tenant.issuer},
           "database_url": stack.database_url, "redis_url": stack.redis_url, "kek_value": stack.kek_value,
           "client_id": agent.client_id, "jwks": agent.jwks(), "pool": max(args.concurrency, 1)}
    env = {**stack.issuer_env(), "SESSION_GRANT_FLOOR": json.dumps(cfg),
           "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)}
    log = open(stack.root / "floor_app.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("granian")), "--interface", "asgi", "--host", "127.0.0.1", "--port",
         base.rsplit(":", 1)[1], "--workers", str(args.workers), "--no-ws", "bench.session_grant:floor_app"],
        cwd=root, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process_group(proc)
                raise RuntimeError("the floor behind granian did not start:\n"
                                   + (stack.root / "floor_app.log").read_text(errors="replace")[-2000:]) from None
            time.sleep(0.1)


async def run_floor_app(stack: Stack, agent: Agent, args: argparse.Namespace) -> dict[str, float]:
    """CPU per request of :class:`FloorApp` under granian (the issuer's workers and flags, the same load
    generator and requests): granian's process tree, PostgreSQL and Redis, in milliseconds."""
    import httpx

    from bench._common import stop_process_group

    tenant = stack.tenant
    assert tenant is not None
    proc, base = _start_floor_app(stack, agent, args)
    try:
        url = f"{base}{urlsplit(tenant.token_endpoint).path}"
        n = min(args.requests, args.batch)
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        clients = [httpx.AsyncClient(limits=limits, timeout=30.0) for _ in range(args.concurrency)]
        out = Fired()
        try:
            warm = Fired()
            await _fire(clients, url, _sign(agent, tenant.issuer, args.warmup), warm)
            if warm.errors:
                raise RuntimeError(f"the floor behind granian failed: {warm.first_error}")
            prepared = _sign(agent, tenant.issuer, n)
            groups = {"floor behind granian": proc.pid, "postgres": stack.pids["postgres"], "redis": stack.pids["redis"]}
            meter = CpuMeter(groups)
            meter.start()
            if args.load_generator == "wrk":
                _fire_wrk(stack, url, prepared, args.concurrency, out)
            else:
                await _fire(clients, url, prepared, out)
            used = meter.stop()
        finally:
            for c in clients:
                await c.aclose()
        if out.errors:
            raise RuntimeError(f"the floor behind granian failed: {out.first_error}")
        return {name: 1000 * used[name] / n for name in groups}
    finally:
        stop_process_group(proc)


# --------------------------------------------------------------------------- in process


async def run_in_process(stack: Stack, agent: Agent, args: argparse.Namespace, rounds: int = 3) -> dict[str, Any]:
    """This process's CPU per grant through the issuer's ASGI app (no HTTP server) and per floor op.

    Rounds alternate app and floor (``--requests`` each, ``--concurrency`` loops); the minimum
    of each is kept, the figure least disturbed by other processes.
    """
    from urllib.parse import urlsplit

    tenant = stack.tenant
    assert tenant is not None
    os.environ.update(stack.issuer_env())  # the issuer's settings are read when its module is imported
    from frontdoor_issuer.asgi import app

    path = urlsplit(tenant.token_endpoint).path
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def life_send(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.failed":
            raise RuntimeError(f"the issuer did not start: {message}")
        if message["type"] == "lifespan.startup.complete":
            started.set()

    events.put_nowait({"type": "lifespan.startup"})
    life = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, events.get,
                                   life_send))
    await asyncio.wait_for(started.wait(), 30)

    async def call(body: bytes, headers: dict[str, str]) -> int:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
                 "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8001), "state": {}}
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        status = 0

        async def receive() -> dict[str, Any]:
            return messages.pop() if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await app(scope, receive, send)
        return status

    async def fire(requests: list[tuple[bytes, dict[str, str]]]) -> int:
        queue = iter(requests)
        failed = 0

        async def loop() -> None:
            nonlocal failed
            for body, headers in queue:
                failed += await call(body, headers) != 200

        await asyncio.gather(*(loop() for _ in range(args.concurrency)))
        return failed

    floor = Floor(stack, agent)
    await floor.open(max(args.concurrency, 1))
    app_ms: list[float] = []
    floor_ms: list[float] = []
    try:
        if await fire(_sign(agent, tenant.issuer, 100)):
            raise RuntimeError("the in-process warm-up failed")
        await floor.run(floor.items(50), 1)
        n = min(args.requests, args.batch)
        for _ in range(rounds):
            prepared = _sign(agent, tenant.issuer, n)
            c0 = time.process_time()
            failed = await fire(prepared)
            app_ms.append(1000 * (time.process_time() - c0) / n)
            if failed:
                raise RuntimeError(f"{failed} in-process grants failed")
            items = floor.items(n)
            c0 = time.process_time()
            await floor.run(items, args.concurrency)
            floor_ms.append(1000 * (time.process_time() - c0) / n)
    finally:
        await floor.close()
        events.put_nowait({"type": "lifespan.shutdown"})
        await asyncio.wait_for(life, 30)
    return {"app_ms": app_ms, "floor_ms": floor_ms, "ratio": min(floor_ms) / min(app_ms)}

# --------------------------------------------------------------------------- main


def report(result: dict[str, Any]) -> None:
    lat: Summary = result["latency"]
    print(f"session_grant  ({result['requests']} Session starts, {result['concurrency']} keep-alive connections, "
          f"granian {result['workers']} worker(s), {os.cpu_count()} CPUs, load generator {result['load_generator']} "
          f"on the same machine)")
    print(f"  endpoint : {result['endpoint_rps']:8.1f} req/s   {lat.line()}   errors {result['errors']}")
    if result["first_error"]:
        print(f"             first error: {result['first_error']}")
    cpu = dict(result["cpu_ms_per_request"])
    other = cpu.pop("other processes", 0.0)
    print("  CPU per request: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cpu.items()))
    busy_other = other * result["requests"] / 1000 / max(result["window_s"], 1e-9)
    if busy_other > 0.1:
        print(f"  NOTE: other processes kept {busy_other:.2f} CPUs busy during the timed window: figures are noisy")
    f = result["floor"]
    print(f"  floor    : {f['sequential']:8.1f} ops/s sequential, {f['concurrent']:.1f} ops/s with "
          f"{result['concurrency']} loops  (signature work alone: {f['crypto_only']:.1f} ops/s)")
    server_cpu = sum(ms for name, ms in cpu.items() if name != "load generator")
    cpu_ratio = f["cpu_ms_per_op"] / server_cpu if server_cpu else 0.0
    result["cpu_ratio"] = cpu_ratio
    cpu_verdict = "meets" if cpu_ratio >= TARGET_CPU_RATIO else "BELOW"
    print(f"  CPU      : floor {f['cpu_ms_per_op']:.2f} ms/op (its process + postgres + redis) vs endpoint "
          f"{server_cpu:.2f} ms/request (issuer + postgres + redis): CPU ratio {cpu_ratio:.2f}  "
          f"({cpu_verdict} the target >= {TARGET_CPU_RATIO})")
    if f["other_cpus"] > 0.1:
        print(f"  NOTE: other processes kept {f['other_cpus']:.2f} CPUs busy during the floor's window")
    if result.get("floor_app_ms"):
        behind = sum(result["floor_app_ms"].values())
        parts = ", ".join(f"{name} {ms:.2f}" for name, ms in result["floor_app_ms"].items())
        print(f"  floor behind granian (second baseline: the floor's work as an ASGI app under the same granian, "
              f"workers and load generator): {behind:.2f} ms/request ({parts}); endpoint CPU ratio against it "
              f"{behind / server_cpu if server_cpu else 0.0:.2f}  (information: the target is against the floor)")
    verdict = "meets" if result["ratio"] >= TARGET_RATIO else "BELOW"
    print(f"  ratio    : endpoint / floor = {result['ratio']:.2f}  ({verdict} the target >= {TARGET_RATIO})")
    if result.get("in_process"):
        ip = result["in_process"]
        print(f"  in process (no HTTP server), this process's CPU: app {min(ip['app_ms']):.3f} ms/grant, floor "
              f"{min(ip['floor_ms']):.3f} ms/op (min of {len(ip['app_ms'])} alternating rounds): ratio "
              f"{ip['ratio']:.2f}; the issuer under granian: {cpu.get('issuer (granian)', 0.0):.2f} ms/request")
    cpus = os.cpu_count() or 1
    print(f"  anchor   : Keycloak budgets {KEYCLOAK_GRANTS_PER_VCPU} client-credential grants/s per vCPU "
          f"= {KEYCLOAK_GRANTS_PER_VCPU * cpus}/s on {cpus}; endpoint = "
          f"{result['endpoint_rps'] / (KEYCLOAK_GRANTS_PER_VCPU * cpus):.2f}x that")
    for title, key in (("cProfile of the floor (sequential), by own time:", "floor_profile"),
                       ("py-spy of the issuer (an extra untimed batch):", "endpoint_profile")):
        if result.get(key):
            print(f"  {title}")
            for line in result[key]:
                print(f"    {line}")


async def _measure(stack: Stack, args: argparse.Namespace) -> dict[str, Any]:
    await stack.create_tenant()
    agent = stack.new_agent()
    stack.start_issuer(workers=args.workers)
    spy_out = stack.root / "issuer.pyspy.txt" if args.profile and find_py_spy() else None
    fired, cpu, spy_lines = await run_endpoint(stack, agent, args, spy_out)
    floor = await run_floor(stack, agent, args)
    floor_app = await run_floor_app(stack, agent, args)
    in_process = await run_in_process(stack, agent, args) if args.in_process else None
    endpoint_rps = rate(fired.count, fired.seconds)
    best_floor = max(floor["sequential"], floor["concurrent"])
    return {
        "requests": fired.count,
        "load_generator": args.load_generator,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "window_s": fired.seconds,
        "endpoint_rps": endpoint_rps,
        "latency": fired.latency(),
        "errors": fired.errors,
        "first_error": fired.first_error,
        "cpu_ms_per_request": {k: 1000 * v / max(fired.count, 1) for k, v in cpu.items()},
        "floor": floor,
        "floor_ops": best_floor,
        "ratio": endpoint_rps / best_floor if best_floor else 0.0,
        "floor_profile": floor.pop("profile"),
        "endpoint_profile": spy_lines if args.profile else [],
        "in_process": in_process,
        "floor_app_ms": floor_app,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    install_signal_handlers()
    with Stack() as stack:
        result = asyncio.run(_measure(stack, args))
    report(result)
    return result


if __name__ == "__main__":
    try:
        outcome = main()
    except KeyboardInterrupt:
        print("interrupted; servers stopped", file=sys.stderr)
        raise SystemExit(130) from None
    raise SystemExit(1 if outcome["errors"] else 0)
