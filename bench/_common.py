"""What every benchmark shares: statistics, a test agent, the stack under test, CPU accounting.

The stack is real: embedded PostgreSQL and Redis (non-durable, as in the tests), the
migrations, one tenant signed up through ``frontdoor_tenancy.tenants.sign_up`` with its
rate limits raised to their maxima, the issuer under granian on a loopback port, and an
agent whose Client ID Metadata Document and JWKS are served by a small threaded HTTP
server on loopback (``http://127.0.0.1:PORT/agent.json``; dev mode accepts plain http to
loopback). Everything is stopped on exit, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parent.parent
KEYCLOAK_GRANTS_PER_VCPU = 120
"""Keycloak's sizing guide budgets 120 client-credential grants/s per vCPU (quality bar)."""

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FORM_HEADERS = {"content-type": "application/x-www-form-urlencoded"}


# --------------------------------------------------------------------------- statistics

def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    if not 0 <= p <= 100:
        raise ValueError("p must be within 0..100")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


@dataclass(frozen=True)
class Summary:
    """Latency figures in milliseconds."""

    n: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    def line(self) -> str:
        return f"p50 {fmt_ms(self.p50_ms)}  p99 {fmt_ms(self.p99_ms)}  mean {fmt_ms(self.mean_ms)}  (n={self.n})"


def summarize(seconds: Sequence[float]) -> Summary:
    """p50/p99/mean/max of durations given in seconds, reported in milliseconds."""
    if not seconds:
        raise ValueError("no samples")
    ms = [s * 1000.0 for s in seconds]
    return Summary(n=len(ms), mean_ms=sum(ms) / len(ms), p50_ms=percentile(ms, 50), p99_ms=percentile(ms, 99),
                   max_ms=max(ms))


def fmt_ms(value: float) -> str:
    """Milliseconds with precision that fits the magnitude."""
    if value < 1:
        return f"{value:.3f} ms"
    if value < 10:
        return f"{value:.2f} ms"
    return f"{value:.1f} ms"


def rate(count: int, seconds: float) -> float:
    """Operations per second (0 for an empty window)."""
    return count / seconds if seconds > 0 else 0.0


# --------------------------------------------------------------------------- the agent

def b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class Agent:
    """A personal agent: an ES256 identity key, a DPoP key, and what it signs (joserfc)."""

    def __init__(self, base_url: str, name: str = "Bench Agent") -> None:
        from joserfc.jwk import ECKey

        self.base_url = base_url
        self.name = name
        self.key = ECKey.generate_key("P-256", parameters={"use": "sig", "alg": "ES256"})
        self.dpop_key = ECKey.generate_key("P-256")
        self.kid = self.key.thumbprint()
        self._dpop_public = self.dpop_key.as_dict(private=False)

    @property
    def client_id(self) -> str:
        return f"{self.base_url}/agent.json"

    def metadata(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "client_name": self.name,
            "jwks_uri": f"{self.base_url}/jwks.json",
            "redirect_uris": [f"{self.base_url}/callback"],
            "token_endpoint_auth_method": "private_key_jwt",
        }

    def jwks(self) -> dict[str, Any]:
        public = self.key.as_dict(private=False)
        public.update({"kid": self.kid, "use": "sig", "alg": "ES256"})
        return {"keys": [public]}

    def _sign(self, claims: dict[str, Any]) -> str:
        from joserfc import jwt

        return jwt.encode({"alg": "ES256", "kid": self.kid}, claims, self.key)

    def client_assertion(self, issuer: str) -> str:
        now = int(time.time())
        return self._sign({"iss": self.client_id, "sub": self.client_id, "aud": issuer, "iat": now,
                           "exp": now + 240, "jti": secrets.token_urlsafe(16)})

    def session_assertion(self, issuer: str, user: str) -> str:
        now = int(time.time())
        return self._sign({"iss": self.client_id, "sub": user, "aud": issuer, "iat": now, "exp": now + 240,
                           "jti": secrets.token_urlsafe(16)})

    def dpop(self, method: str, url: str, *, token: str | None = None) -> str:
        import hashlib

        from joserfc import jwt

        claims: dict[str, Any] = {"htm": method, "htu": url, "iat": int(time.time()),
                                  "jti": secrets.token_urlsafe(16)}
        if token is not None:
            claims["ath"] = b64url(hashlib.sha256(token.encode()).digest())
        return jwt.encode({"typ": "dpop+jwt", "alg": "ES256", "jwk": self._dpop_public}, claims, self.dpop_key)

    def token_request(self, issuer: str, user: str) -> tuple[bytes, dict[str, str]]:
        """One Session start, ready to send: the form body and the headers (DPoP included)."""
        form = {
            "grant_type": JWT_BEARER,
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": self.client_assertion(issuer),
            "assertion": self.session_assertion(issuer, user),
        }
        headers = {**FORM_HEADERS, "dpop": self.dpop("POST", f"{issuer}/oauth/token")}
        return urlencode(form).encode(), headers


class AgentHost:
    """Serves the agent's metadata document and JWKS on 127.0.0.1 (threaded http.server)."""

    def __init__(self) -> None:
        self._docs: dict[str, bytes] = {}
        docs = self._docs

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = docs.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("cache-control", "max-age=3600")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="agent-host", daemon=True)
        self._thread.start()

    def publish(self, agent: Agent) -> Agent:
        self._docs["/agent.json"] = json.dumps(agent.metadata()).encode()
        self._docs["/jwks.json"] = json.dumps(agent.jwks()).encode()
        return agent

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


# --------------------------------------------------------------------------- processes

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        out[int(entry)] = int(fields[1])
    return out


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (Linux /proc)."""
    parents = _ppid_map()
    tree, frontier = [root], [root]
    while frontier:
        nxt = [pid for pid, ppid in parents.items() if ppid in frontier]
        tree.extend(nxt)
        frontier = nxt
    return tree


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds consumed so far by ``pids`` (exited ones count 0)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
    return total / tick


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def machine_busy_seconds() -> float:
    """CPU seconds every process on the machine has used (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds per process group between `start` and `stop`."""

    def __init__(self, groups: dict[str, int | None]) -> None:
        self._roots = {name: pid for name, pid in groups.items() if pid}
        self._trees: dict[str, list[int]] = {}
        self._before: dict[str, float] = {}
        self.used: dict[str, float] = {}

    def start(self) -> None:
        self._trees = {name: process_tree(pid) for name, pid in self._roots.items()}
        self._before = {name: cpu_seconds(t) for name, t in self._trees.items()}
        self._before["load generator"] = own_cpu_seconds()
        self._before["machine"] = machine_busy_seconds()

    def stop(self) -> dict[str, float]:
        self.used = {name: cpu_seconds(t) - self._before[name] for name, t in self._trees.items()}
        self.used["load generator"] = own_cpu_seconds() - self._before["load generator"]
        busy = machine_busy_seconds() - self._before["machine"]
        self.used["other processes"] = max(busy - sum(self.used.values()), 0.0)
        return self.used


def install_signal_handlers() -> None:
    """SIGINT (even if inherited as ignored), SIGTERM and SIGHUP unwind like Ctrl-C.

    Every ``finally`` and exit callback then stops the servers it started.
    """

    def _raise(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, _raise)


# --------------------------------------------------------------------------- the stack

@dataclass
class Tenant:
    id: str
    slug: str
    issuer: str

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/oauth/token"


@dataclass
class Stack:
    """PostgreSQL + Redis + migrations + one tenant + (optionally) the issuer under granian."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fdbench-")))
    kek_value: str = ""
    database_url: str = ""
    redis_url: str = ""
    issuer_base_url: str = ""
    tenant: Tenant | None = None
    agent_host: AgentHost | None = None
    issuer_proc: subprocess.Popen[bytes] | None = None
    _pg: Any = None
    _redis: Any = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    # -- lifecycle
    def __enter__(self) -> Stack:
        self._stack.callback(shutil.rmtree, self.root, True)
        try:
            self._start_databases()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start_databases(self) -> None:
        from frontdoor_devstack.postgres import EmbeddedPostgres
        from frontdoor_devstack.redis_server import EmbeddedRedis
        from frontdoor_devstack.seed import apply_all_migrations
        from frontdoor_tenancy.credentials.key_encryption import generate_kek_value

        os.chmod(self.root, 0o711)  # as root the embedded PostgreSQL runs as 'nobody'
        pg = EmbeddedPostgres(self.root / "pg", database="frontdoor_bench", durable=False)
        self._stack.callback(pg.stop)
        pg.start()
        self._pg = pg
        rs = EmbeddedRedis(self.root / "redis", durable=False)
        self._stack.callback(rs.stop)
        rs.start()
        self._redis = rs
        self.database_url, self.redis_url = pg.url, rs.url
        asyncio.run(apply_all_migrations(self.database_url))
        self.kek_value = generate_kek_value()
        self.issuer_base_url = f"http://127.0.0.1:{free_port()}"
        host = AgentHost()
        self._stack.callback(host.stop)
        self.agent_host = host

    @property
    def pids(self) -> dict[str, int | None]:
        """Root process of each server, for CPU accounting."""
        def pid(obj: Any) -> int | None:
            proc = getattr(obj, "_proc", None)
            return proc.pid if proc is not None else None

        return {"issuer (granian)": self.issuer_proc.pid if self.issuer_proc else None,
                "postgres": pid(self._pg), "redis": pid(self._redis)}

    # -- data
    def new_agent(self) -> Agent:
        assert self.agent_host is not None
        return self.agent_host.publish(Agent(self.agent_host.base_url))

    async def create_tenant(self, slug: str = "bench") -> Tenant:
        """Sign a tenant up and raise its token-endpoint rate limits to their maxima."""
        import msgspec
        from frontdoor_core.db import create_pool
        from frontdoor_tenancy import issuer_settings, tenants
        from frontdoor_tenancy.credentials.key_encryption import Kek

        pool = await create_pool(self.database_url, min_size=1, max_size=2)
        try:
            result = await tenants.sign_up(
                pool,
                tenants.SignUp(email=f"admin@{slug}.bench.test", password=secrets.token_urlsafe(18),
                               organization_name="Bench Company", slug=slug),
                kek=Kek.from_env_value(self.kek_value), now=datetime.now(UTC),
            )
            tenant_id = result.tenant.id
            async with pool.acquire() as conn:
                stored = await issuer_settings.get_settings(conn, tenant_id)
                raised = msgspec.structs.replace(stored.settings, sessions_per_agent_per_minute=100_000,
                                                 token_requests_per_network_per_minute=1_000_000)
                await issuer_settings.update_settings(conn, tenant_id, issuer_settings.validate_settings(
                    raised, dev=True), if_version=stored.version)
        finally:
            await pool.close()
        self.tenant = Tenant(id=tenant_id, slug=slug, issuer=f"{self.issuer_base_url}/{slug}")
        return self.tenant

    async def resource_credential(self) -> str:
        """A resource-server credential for the tenant (the sdk's introspection secret)."""
        from frontdoor_core.db import create_pool
        from frontdoor_sessions import create_credential
        from frontdoor_tenancy.actor import Actor

        assert self.tenant is not None
        pool = await create_pool(self.database_url, min_size=1, max_size=1)
        try:
            async with pool.acquire() as conn, conn.transaction():
                created = await create_credential(conn, Actor(tenant_id=self.tenant.id, type="system"), "bench")
        finally:
            await pool.close()
        return created.secret

    # -- the issuer
    def issuer_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "FRONTDOOR_KEK": self.kek_value,
            "FRONTDOOR_ENV": "dev",
            "FRONTDOOR_ISSUER_BASE_URL": self.issuer_base_url,
            "FRONTDOOR_OUTBOUND_ALLOWLIST": "127.0.0.1/32",
            "FRONTDOOR_DATA_DIR": str(self.root / "data"),
        })
        return env

    def start_issuer(self, *, workers: int = 1, granian_args: Sequence[str] = (),
                     extra_env: dict[str, str] | None = None, timeout: float = 30.0) -> None:
        """The issuer under granian (one worker, as ``make run`` starts it)."""
        granian = str(Path(sys.executable).with_name("granian"))
        port = self.issuer_base_url.rsplit(":", 1)[1]
        log = open(self.root / "issuer.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port", port, "--workers", str(workers), "--no-ws",
             *granian_args, "frontdoor_issuer.asgi:app"],
            env={**self.issuer_env(), **(extra_env or {})}, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.issuer_proc = proc
        self._stack.callback(stop_process_group, proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.issuer_base_url}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        tail = (self.root / "issuer.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the issuer did not start:\n{tail}")

    def stop_issuer(self) -> None:
        if self.issuer_proc is not None:
            stop_process_group(self.issuer_proc)
            self.issuer_proc = None

    def issuer_log_tail(self, chars: int = 2000) -> str:
        path = self.root / "issuer.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def stop_process_group(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM the child's process group (granian's workers too), then SIGKILL if needed."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# --------------------------------------------------------------------------- py-spy

def find_py_spy() -> str | None:
    """py-spy from $PY_SPY or PATH, if installed (optional: ``pip install py-spy``)."""
    candidate = os.environ.get("PY_SPY") or shutil.which("py-spy")
    return candidate if candidate and os.access(candidate, os.X_OK) else None


@contextlib.contextmanager
def py_spy_record(pid: int, out: Path, seconds: int) -> Iterator[subprocess.Popen[bytes] | None]:
    """Sample ``pid`` and its subprocesses with py-spy (raw collapsed stacks) while the block runs."""
    exe = find_py_spy()
    if exe is None:
        yield None
        return
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--subprocesses", "--format", "raw", "--rate", "250",
                             "--duration", str(seconds), "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(1.0)  # let it attach
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            stop_process_group(proc)


_PLUMBING = frozenset({"mp.py", "common.py", "cli.py", "core.py", "process.py", "popen_fork.py", "context.py",
                       "base_events.py", "events.py", "granian", "_futures.py"})
"""Files whose frames sit under every sample (server start-up, the event loop): not worth listing."""


def _frame_name(frame: str) -> str:
    if " (" not in frame:
        return frame
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1].rstrip(')')})"


def summarize_collapsed(path: Path, top: int = 15) -> list[str]:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    if not path.exists():
        return ["(py-spy wrote nothing)"]
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(f) for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        total += count
        leaf = frames[-1] if frames else "(no Python frame: native code, e.g. granian's runtime)"
        self_counts[leaf] = self_counts.get(leaf, 0) + count
        for frame in set(frames):
            if frame.rsplit("(", 1)[-1].rstrip(")") not in _PLUMBING:
                incl_counts[frame] = incl_counts.get(frame, 0) + count
    if not total:
        return ["(no samples)"]
    lines = [f"{total} samples; top self time:"]
    lines += [f"  {100 * c / total:5.1f}%  {name}" for name, c in
              sorted(self_counts.items(), key=lambda kv: -kv[1])[:top]]
    lines.append("top inclusive time (server start-up and event-loop frames left out):")
    lines += [f"  {100 * c / total:5.1f}%  {name}" for name, c in
              sorted(incl_counts.items(), key=lambda kv: -kv[1])[:top * 2]]
    return lines
