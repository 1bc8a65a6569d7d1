"""``make run``: the whole stack on one machine, stopped cleanly with Ctrl-C or SIGTERM.

Starts embedded PostgreSQL and Redis when ``DATABASE_URL`` / ``REDIS_URL`` are unset,
applies migrations, seeds a demo tenant, then runs each service under granian plus the
Celery worker and beat, and prints where everything is. With ``FRONTDOOR_DEMO_OIDC=1``
(``make run OIDC=1``) also a local OpenID Provider and a second demo tenant signing in there
(`frontdoor_devstack.oidc_demo`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontdoor_core.settings import ENV_NAMES, Settings, SettingsError, load_settings

from . import oidc_demo
from .load_balancer import Backend, LoadBalancer, haproxy_config
from .postgres import EmbeddedPostgres
from .processes import Process, Replica, expand, log_path, replica_count
from .redis_server import EmbeddedRedis
from .seed import (
    DEMO_ACCOUNTS,
    apply_all_migrations,
    ensure_operations,
    ensure_sign_in,
    northwind_login_secrets,
    seed_demo,
    write_northwind_document,
)
from .supervisor import supervise, write_replicas

_BANNER = "=" * 72
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Children get SIGTERM if this supervisor dies abruptly: no orphans even on kill -9.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _kek(data_dir: Path) -> str:
    path = data_dir / "kek"
    if path.exists():
        return path.read_text().strip()
    from frontdoor_tenancy.credentials.key_encryption import generate_kek_value

    value = generate_kek_value()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


_PUBLIC_SERVICES = ("console", "issuer", "ledger")


def derived_base_urls(environ: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """The public base URL of each service whose ``FRONTDOOR_*_BASE_URL`` is unset, in dev.

    ``make run`` binds each service to ``127.0.0.1:{FRONTDOOR_*_PORT}``; a moved port with
    the default base URL would send Northwind, ``poppy.json`` and the metadata to whatever
    else listens on 8000-8002. An explicit base URL (a proxy in front) is kept as set.
    """
    if not settings.is_dev:
        return {}
    derived = {}
    for name in _PUBLIC_SERVICES:
        var = ENV_NAMES[f"{name}_base_url"]
        if var not in environ:
            derived[var] = f"http://127.0.0.1:{getattr(settings, f'{name}_port')}"
    return derived


EXAMPLE_URL_ENV = "FRONTDOOR_EXAMPLE_PUBLIC_URL"


def example_public_url(environ: Mapping[str, str], settings: Settings) -> str:
    """Northwind's public origin: ``http://127.0.0.1:{FRONTDOOR_EXAMPLE_PORT}`` unless
    ``FRONTDOOR_EXAMPLE_PUBLIC_URL`` names the one a proxy in front serves it at (e.g.
    ``https://northwind.example`` behind a TLS proxy on loopback, so the simulator's discovery
    and the publish check can fetch the demo domain's ``poppy.json``). ``make run`` only; the
    demo tenant's APIs, login page and webhook are seeded with it (a fresh data directory).
    """
    value = environ.get(EXAMPLE_URL_ENV, "").strip()
    if not value:
        return f"http://127.0.0.1:{settings.example_port}"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{EXAMPLE_URL_ENV} must be an origin such as https://northwind.example, not {value!r}")
    return f"{parts.scheme}://{parts.netloc}"


def process_table(settings: Settings) -> list[Process]:
    """Every Frontdoor process ``make run`` starts; ``replicated`` ones run FRONTDOOR_REPLICAS times."""
    py = sys.executable
    granian = str(Path(py).with_name("granian"))
    celery = str(Path(py).with_name("celery"))

    def asgi(name: str) -> list[str]:
        return [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port", "{port}", "--workers", "1",
                "--no-ws", f"frontdoor_{name}.asgi:app"]

    return [
        Process("console", asgi("console"), settings.console_port),
        # granian with FRONTDOOR_ISSUER_WORKERS workers (default: one per CPU; one per replica when replicated)
        Process("issuer", [py, "-m", "frontdoor_issuer.serve", "--host", "127.0.0.1", "--port", "{port}"],
                settings.issuer_port),
        # granian with FRONTDOOR_LEDGER_WORKERS workers (default: one per CPU; one per replica when replicated)
        Process("ledger", [py, "-m", "frontdoor_ledger.serve", "--host", "127.0.0.1", "--port", "{port}"],
                settings.ledger_port),
        # The dispatcher: the deliverer (deliveries and retries, straight from PostgreSQL; one per
        # replica), and beat with a Celery worker for the periodic jobs (sweeps, retention, metering).
        Process("deliverer", [py, "-m", "frontdoor_dispatcher.deliverer"]),
        Process("worker", [celery, "-A", "frontdoor_dispatcher.celery_app", "worker", "--concurrency", "1",
                           "--loglevel", "INFO", "-n", f"{{replica}}-{secrets.token_hex(3)}@%h"]),
        Process("beat", [celery, "-A", "frontdoor_dispatcher.celery_app", "beat", "--loglevel", "INFO"],
                replicated=False),  # one scheduler, never two (docs/architecture.md)
    ]


def start_load_balancer(stack: Stack, table: list[Replica], settings: Settings, data_dir: Path,
                        logs: Path) -> LoadBalancer:
    """HAProxy on the public ports, in front of the HTTP replicas (``FRONTDOOR_REPLICAS`` > 1)."""
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("FRONTDOOR_REPLICAS needs HAProxy: apt-get install haproxy")
    backends = [Backend(name, getattr(settings, f"{name}_port"),
                        {r.name: r.port for r in table if r.kind == name and r.port is not None})
                for name in _PUBLIC_SERVICES]
    socket_path = data_dir / "haproxy.sock"
    config = data_dir / "haproxy.cfg"
    config.write_text(haproxy_config(backends, socket_path))
    check = subprocess.run([haproxy, "-c", "-q", "-f", str(config)], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise SystemExit(f"haproxy refused {config}:\n{check.stdout}{check.stderr}")
    stack.spawn("haproxy", [haproxy, "-db", "-f", str(config)], dict(os.environ), logs / "haproxy.log")
    return LoadBalancer(socket_path)


def _wait_http(url: str, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback health probe
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.2)
    return False


class Stack:
    """Owns every child process and embedded server; `stop` is safe to call twice."""

    def __init__(self) -> None:
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.servers: list[Any] = []
        self.stopping = False

    def spawn(self, name: str, args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        out = open(log, "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=_die_with_parent)  # noqa: PLW1509
        out.close()
        self.children = [(n, p) for n, p in self.children if n != name] + [(name, proc)]
        return proc

    def stop_child(self, name: str, timeout: float = 15.0) -> None:
        """SIGTERM one child's process group and wait for it (SIGKILL past ``timeout``)."""
        for child, proc in self.children:
            if child == name and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        print("\nStopping Frontdoor...", flush=True)
        for _, proc in self.children:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, proc in self.children:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                print(f"  {name} did not stop in time; killing it", flush=True)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for server in reversed(self.servers):
            server.stop()
        print("Stopped.", flush=True)



def replica_env_defaults(env: dict[str, str]) -> None:
    """What ``REPLICAS`` > 1 sets unless the environment already does.

    Behind the load balancer its ``X-Forwarded-For`` names the client (loopback is
    trusted), and each issuer and ledger replica runs one granian worker, so the replicas,
    not a replica's workers, share the cores.
    """
    env.setdefault(ENV_NAMES["trusted_proxies"], "127.0.0.1/32")
    env.setdefault(ENV_NAMES["issuer_workers"], "1")
    env.setdefault(ENV_NAMES["ledger_workers"], "1")


def main() -> int:
    # `make run` is development: it says so itself rather than relying on the default.
    environ = {ENV_NAMES["env"]: "dev", **os.environ}
    try:
        settings = load_settings(environ)
        replicas = replica_count(environ)
        with_oidc = oidc_demo.wanted(environ)
        northwind_url = example_public_url(environ, settings)
    except (SettingsError, ValueError) as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(settings.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(data_dir, 0o711)  # noqa: S103 - traversable (the embedded PostgreSQL may run as 'nobody'), not listable
    logs = data_dir / "logs"
    logs.mkdir(exist_ok=True)
    env = dict(environ)
    env.setdefault(ENV_NAMES["kek"], settings.kek or _kek(data_dir))
    env.update(derived_base_urls(environ, settings))  # the children get the same URLs
    stack = Stack()

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        if not settings.database_url:
            pg = EmbeddedPostgres(data_dir / "postgres")
            pg.start()
            stack.servers.append(pg)
            env["DATABASE_URL"] = pg.url
        if not settings.redis_url:
            rs = EmbeddedRedis(data_dir / "redis")
            rs.start()
            stack.servers.append(rs)
            env["REDIS_URL"] = rs.url
        settings = load_settings(env)
        asyncio.run(apply_all_migrations(settings.database_url))
        demo = asyncio.run(seed_demo(settings, data_dir, northwind_url=northwind_url))
        if demo.get("tenant_id"):
            # Also for a data directory made before sign-in existed: configure what is missing.
            asyncio.run(ensure_sign_in(settings, demo["tenant_id"], northwind_url))
        oidc: tuple[dict[str, Any], oidc_demo.LocalIdp] | None = None
        if with_oidc:
            oidc = _start_oidc_demo(stack, settings, data_dir, logs)
        if replicas > 1:
            replica_env_defaults(env)
        table = expand(process_table(settings), replicas)
        for proc in table:
            stack.spawn(proc.name, proc.argv, env, log_path(logs, proc))
        services = [(p.name, p.port) for p in table if p.port is not None]
        lb = None
        if replicas > 1:
            lb = start_load_balancer(stack, table, settings, data_dir, logs)
            services += [("haproxy", getattr(settings, f"{name}_port")) for name in _PUBLIC_SERVICES]
        if demo.get("tenant_id") and demo.get("northwind_credential"):
            webhook_secret = asyncio.run(ensure_operations(settings, data_dir, demo["tenant_id"], northwind_url))
            poppy = asyncio.run(write_northwind_document(settings, data_dir, demo["tenant_id"]))
            login = northwind_login_secrets(data_dir)
            demo["northwind_password"] = login["demo_password"]
            nw_env = {**env, "NORTHWIND_ISSUER": f"{settings.issuer_base_url}/{demo['slug']}",
                      "NORTHWIND_CREDENTIAL": demo["northwind_credential"], "NORTHWIND_PUBLIC_URL": northwind_url,
                      "NORTHWIND_POPPY_JSON": str(poppy),
                      "NORTHWIND_SIGNING_KEY": json.dumps(login["signing_key"]),
                      "NORTHWIND_DEMO_PASSWORD": login["demo_password"],
                      "NORTHWIND_LEDGER_URL": f"{settings.ledger_base_url}/{demo['slug']}",
                      "NORTHWIND_WEBHOOK_SECRET": webhook_secret}
            granian = str(Path(sys.executable).with_name("granian"))
            stack.spawn("northwind", [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port",
                                      str(settings.example_port), "--workers", "1", "--no-ws", "northwind.asgi:app"],
                        nw_env, logs / "northwind.log")
            services.append(("northwind", settings.example_port))
        for name, port in services:
            if not _wait_http(f"http://127.0.0.1:{port}/healthz"):
                print(f"{name} did not start; see {logs / (name + '.log')}", file=sys.stderr)
                stack.stop()
                return 1
        if oidc is not None and not _wait_http(f"{oidc[1].issuer}/.well-known/openid-configuration"):
            print(f"the OpenID Provider did not start; see {logs / 'oidc-idp.log'}", file=sys.stderr)
            stack.stop()
            return 1
        if lb is not None:
            write_replicas(data_dir, stack, table)
        _print_banner(settings, demo, logs, table if lb is not None else None, oidc, northwind=northwind_url)
        return supervise(stack, table, env, logs, lb=lb, data_dir=data_dir)
    except KeyboardInterrupt:
        stack.stop()
        return 0
    except BaseException:
        stack.stop()
        raise


def _start_oidc_demo(stack: Stack, settings: Settings, data_dir: Path,
                     logs: Path) -> tuple[dict[str, Any], oidc_demo.LocalIdp]:
    """The local OpenID Provider (a child like the services) and the ``demo-oidc`` tenant connected to it."""
    secrets_ = oidc_demo.idp_secrets(data_dir)
    port = oidc_demo.choose_port(int(secrets_.get("port") or 0))
    idp = oidc_demo.local_idp(settings.issuer_base_url, secrets_, port)
    oidc_demo.remember_port(data_dir, secrets_, port)
    creds = asyncio.run(oidc_demo.seed_oidc_tenant(settings, data_dir))
    if creds.get("tenant_id"):
        asyncio.run(oidc_demo.ensure_oidc_login(settings, creds["tenant_id"], idp))
    stack.spawn("oidc-idp", idp.argv, idp.env, logs / "oidc-idp.log")
    return creds, idp


def _replica_lines(table: list[Replica], logs: Path) -> list[str]:
    kinds: dict[str, list[str]] = {}
    for r in table:
        kinds.setdefault(r.kind, []).append(f"{r.name} 127.0.0.1:{r.port}" if r.port else r.name)
    return [
        f"Replicas (FRONTDOOR_REPLICAS), the public ports above are HAProxy's (round robin, /readyz checked; "
        f"{logs / 'haproxy.log'}):",
        *(f"  {kind:<8} {', '.join(names)}" for kind, names in kinds.items()),
        f"  A replica that exits is started again; kill -HUP {os.getpid()} restarts every process in turn.",
        "",
    ]


def _print_banner(settings: Any, demo: dict[str, str], logs: Path, table: list[Replica] | None = None,
                  oidc: tuple[dict[str, Any], oidc_demo.LocalIdp] | None = None, *,
                  northwind: str | None = None) -> None:
    northwind = northwind or f"http://127.0.0.1:{settings.example_port}"
    lines = [
        _BANNER,
        "Frontdoor is running.",
        f"  dashboard                 {settings.console_base_url}/login   (sign in with the demo admin below)",
        f"  console + management API  {settings.console_base_url}   (OpenAPI: {settings.console_base_url}/api/v1/openapi.json)",
        f"  issuer                    {settings.issuer_base_url}",
        f"  ledger                    {settings.ledger_base_url}   (operations endpoint: "
        f"{settings.ledger_base_url}/{demo['slug']}/operations)",
        f"  example company Northwind {northwind}   (poppy.json, /api/products, /api/orders, /mcp)",
        f"  demo issuer metadata      {settings.issuer_base_url}/.well-known/oauth-authorization-server/{demo['slug']}",
        "  deliverer                 webhook deliveries and retries, straight from PostgreSQL",
        "  worker + beat             Celery (periodic jobs; domains due a DNS check every "
        f"{int(settings.domain_sweep_interval.total_seconds())} s)",
        "",
        "Demo tenant:",
        f"  admin email     {demo['email']}",
        f"  admin password  {demo['password']}",
        f"  API key         {demo['api_key']}",
        f"  (kept in {demo['file']})",
        "",
    ]
    if demo.get("northwind_password"):
        lines += [
            "Northwind demo accounts (sign in at Northwind when an agent connects, or at "
            f"{northwind}/account/agents):",
            *(f"  {email:<26}  password {demo['northwind_password']}" for email in DEMO_ACCOUNTS),
            f"  Play the user: .venv/bin/python scripts/play_agent.py --company {northwind}",
            "",
        ]
    if oidc is not None:
        lines += oidc_demo.banner_lines(settings, *oidc)
    if table is not None:
        lines += _replica_lines(table, logs)
    lines += [
        f"Logs: {logs}    Stop: Ctrl-C",
    ]
    if settings.is_dev:
        lines += ["", f"DEV MODE (FRONTDOOR_ENV={settings.env}): plain http:// is allowed on loopback. Never expose this."]
    lines.append(_BANNER)
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
