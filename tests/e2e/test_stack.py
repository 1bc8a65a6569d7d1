"""The whole stack over real sockets, exactly as ``make run`` starts it.

Runs ``python -m frontdoor_devstack.run`` (embedded PostgreSQL and Redis, the console and
issuer under granian, the Celery worker and beat) with short domain timings and a local
DNS server, then onboards a company using only HTTP, watches the scheduled check suspend
the domain once its record is gone, and stops the stack with SIGTERM: nothing may be left
running.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import unique
from tests.support.dns_server import LocalDNS

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    proc: subprocess.Popen[str]
    console: str
    issuer: str
    data_dir: Path
    output: list[str]
    northwind: str


def _pump(stream: object, sink: queue.Queue[str], lines: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line)
        sink.put(line)


@pytest.fixture(scope="module")
def dns_e2e() -> Iterator[LocalDNS]:
    with LocalDNS() as server:
        yield server


@pytest.fixture(scope="module")
def stack(dns_e2e: LocalDNS) -> Iterator[Stack]:
    data_dir = Path(tempfile.mkdtemp(prefix="fde2e-"))
    os.chmod(data_dir, 0o711)
    cport, iport, nport = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "FRONTDOOR_KEK")}
    env.update({
        "FRONTDOOR_ENV": "dev",
        "FRONTDOOR_DATA_DIR": str(data_dir),
        "FRONTDOOR_CONSOLE_PORT": str(cport),
        "FRONTDOOR_ISSUER_PORT": str(iport),
        "FRONTDOOR_EXAMPLE_PORT": str(nport),
        "FRONTDOOR_CONSOLE_BASE_URL": f"http://127.0.0.1:{cport}",
        "FRONTDOOR_ISSUER_BASE_URL": f"http://127.0.0.1:{iport}",
        "FRONTDOOR_DNS_NAMESERVERS": f"127.0.0.1:{dns_e2e.port}",
        "FRONTDOOR_DNS_TIMEOUT": "1s",
        "FRONTDOOR_DOMAIN_RECHECK_INTERVAL": "1s",
        "FRONTDOOR_DOMAIN_PENDING_RECHECK": "1s",
        "FRONTDOOR_DOMAIN_GRACE_PERIOD": "3s",
        "FRONTDOOR_DOMAIN_SWEEP_INTERVAL": "1s",
    })
    proc = subprocess.Popen([sys.executable, "-m", "frontdoor_devstack.run"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    q: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, q, lines), daemon=True).start()
    deadline = time.monotonic() + 120
    while True:
        try:
            line = q.get(timeout=0.5)
        except queue.Empty:
            line = ""
        if "Frontdoor is running." in line:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the stack did not start:\n" + "".join(lines))
    time.sleep(0.5)  # let the banner finish printing
    s = Stack(proc, f"http://127.0.0.1:{cport}", f"http://127.0.0.1:{iport}", data_dir, lines,
              f"http://127.0.0.1:{nport}")
    try:
        yield s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_banner_prints_urls_and_demo_credentials(stack: Stack) -> None:
    text = "".join(stack.output)
    assert stack.console in text and stack.issuer in text
    assert "admin email" in text and "API key         fdk_" in text
    assert "DEV MODE" in text


def test_health_and_readiness(stack: Stack) -> None:
    assert httpx.get(f"{stack.northwind}/healthz").status_code == 200
    for base in (stack.console, stack.issuer):
        r = httpx.get(f"{base}/healthz")
        assert r.status_code == 200 and r.json()["status"] == "ok"
        r = httpx.get(f"{base}/readyz")
        assert r.status_code == 200 and r.json()["checks"] == {"database": "ok", "redis": "ok"}


def test_the_example_company_is_wired_to_the_demo_issuer(stack: Stack) -> None:
    """Northwind serves the poppy.json Frontdoor generated, naming the demo issuer."""
    doc = httpx.get(f"{stack.northwind}/.well-known/poppy.json").json()
    assert doc["auth"]["issuer"] == f"{stack.issuer}/demo"
    assert {a["type"] for a in doc["apis"]} == {"openapi", "mcp"}
    meta = httpx.get(f"{stack.issuer}/.well-known/oauth-authorization-server/demo").json()
    assert "northwind.example" in meta["poppy_domains"]
    # a PAP API takes a Session Token: no token, no data
    r = httpx.get(f"{stack.northwind}/api/products")
    assert r.status_code == 401 and "www-authenticate" in r.headers


def test_onboarding_over_http_and_scheduled_suspension(stack: Stack, dns_e2e: LocalDNS) -> None:
    slug = unique("e2e-")
    r = httpx.post(f"{stack.console}/api/v1/signup", json={
        "email": f"owner@{slug}.example.com", "password": "a long and unguessable passphrase",
        "organization_name": "E2E Co", "slug": slug})
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    domain = f"{slug}.example.com"
    claim = httpx.post(f"{stack.console}/api/v1/domains", json={"domain": domain},
                       headers={"Authorization": f"Bearer {key}"}).json()
    dns_e2e.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])

    # The stdlib-only onboarding script does the rest (it finds the existing claim).
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "onboard.py"), "--console", stack.console, "--issuer", stack.issuer,
         "--slug", slug, "--email", f"owner@{slug}.example.com", "--domain", domain, "--api-key", key, "--wait", "20"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"poppy_domains: ['{domain}']" in done.stdout

    dns_e2e.remove(claim["txt"]["name"])
    deadline = time.monotonic() + 45
    while True:
        meta = httpx.get(f"{stack.issuer}/.well-known/oauth-authorization-server/{slug}").json()
        if domain not in meta["poppy_domains"]:
            break
        assert time.monotonic() < deadline, "the scheduled check never suspended the domain"
        time.sleep(0.5)
    state = httpx.get(f"{stack.console}/api/v1/domains/{domain}", headers={"Authorization": f"Bearer {key}"}).json()
    assert state["status"] == "suspended"


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in cmd or text in environ:
            found.append(f"{pid}: {cmd[:120]}")
    return found


def test_zz_sigterm_stops_everything(stack: Stack) -> None:
    """Runs last in this module: SIGTERM leaves no process behind."""
    assert _processes_mentioning(str(stack.data_dir))  # the stack's processes are visible while it runs
    stack.proc.send_signal(signal.SIGTERM)
    assert stack.proc.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while _processes_mentioning(str(stack.data_dir)):
        assert time.monotonic() < deadline, _processes_mentioning(str(stack.data_dir))
        time.sleep(0.2)
    assert "Stopped." in "".join(stack.output)
