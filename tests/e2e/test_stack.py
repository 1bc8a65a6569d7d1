"""The whole stack over real sockets, exactly as ``make run`` starts it.

Runs ``python -m frontdoor_devstack.run`` (embedded PostgreSQL and Redis, the console and
issuer under granian, the deliverer, the Celery worker and beat) with short domain timings and a local
DNS server, then onboards a company using only HTTP, watches the scheduled check suspend
the domain once its record is gone, plays a whole Device Sign-In (an agent built on httpx
and joserfc, a person in a browser at Frontdoor's pages and Northwind's login page, a
disconnect through the management API), and stops the stack with SIGTERM: nothing may be
left running.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode, urljoin

import httpx
import pytest

from tests.conformance.browser import forms
from tests.conftest import unique
from tests.support.devstack import free_port, start_devstack
from tests.support.dns_server import LocalDNS

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stack:
    proc: subprocess.Popen[str]
    console: str
    issuer: str
    data_dir: Path
    output: list[str]
    northwind: str
    ledger: str


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
    cport, iport, lport, nport = free_port(), free_port(), free_port(), free_port()
    extra = {  # no FRONTDOOR_ENV: `make run` sets dev itself
        "FRONTDOOR_CONSOLE_PORT": str(cport),
        "FRONTDOOR_ISSUER_PORT": str(iport),
        "FRONTDOOR_LEDGER_PORT": str(lport),  # never the default 8002: a developer's `make run` may hold it
        "FRONTDOOR_EXAMPLE_PORT": str(nport),
        # Ports only: every public base URL must follow its port (issue #12), none is set here.
        "FRONTDOOR_DNS_NAMESERVERS": f"127.0.0.1:{dns_e2e.port}",
        "FRONTDOOR_DNS_TIMEOUT": "1s",
        "FRONTDOOR_DOMAIN_RECHECK_INTERVAL": "1s",
        "FRONTDOOR_DOMAIN_PENDING_RECHECK": "1s",
        "FRONTDOOR_DOMAIN_GRACE_PERIOD": "3s",
        "FRONTDOOR_DOMAIN_SWEEP_INTERVAL": "1s",
    }
    try:
        run = start_devstack(data_dir, extra, timeout=120)
    except AssertionError as exc:
        pytest.fail(f"the stack did not start: {exc}")
    proc, lines = run.proc, run.output
    s = Stack(proc, f"http://127.0.0.1:{cport}", f"http://127.0.0.1:{iport}", data_dir, lines,
              f"http://127.0.0.1:{nport}", f"http://127.0.0.1:{lport}")
    try:
        yield s
    finally:
        run.stop()  # SIGTERM first: make run stops its embedded PostgreSQL and Redis (a SIGKILL left them running)


def test_banner_prints_urls_and_demo_credentials(stack: Stack) -> None:
    text = "".join(stack.output)
    assert stack.console in text and stack.issuer in text
    assert f"dashboard                 {stack.console}/login" in text
    assert "admin email" in text and "API key         fdk_" in text
    assert "DEV MODE" in text
    assert "ada@northwind.example" in text and "grace@northwind.example" in text
    assert f"password {northwind_password(stack)}" in text


def test_moved_ports_alone_move_every_public_url(stack: Stack) -> None:
    """Only FRONTDOOR_*_PORT are set: the banner, the metadata and Northwind's poppy.json use them."""
    text = "".join(stack.output)
    assert f"console + management API  {stack.console}   (OpenAPI: {stack.console}/api/v1/openapi.json)" in text
    assert f"issuer                    {stack.issuer}\n" in text
    assert f"ledger                    {stack.ledger}   (operations endpoint: {stack.ledger}/demo/operations)" in text
    assert f"example company Northwind {stack.northwind}" in text
    assert f"demo issuer metadata      {stack.issuer}/.well-known/oauth-authorization-server/demo" in text
    assert "DEV MODE (FRONTDOOR_ENV=dev)" in text
    assert not re.search(r"127\.0\.0\.1:800[0-3]\b", text), text
    meta = httpx.get(f"{stack.issuer}/.well-known/oauth-authorization-server/demo").json()
    assert meta["issuer"] == f"{stack.issuer}/demo"
    urls = {k: v for k, v in meta.items() if isinstance(v, str) and v.startswith("http")}
    assert urls and all(v.startswith(f"{stack.issuer}/demo/") or v == f"{stack.issuer}/demo"
                        for v in urls.values()), urls
    doc = httpx.get(f"{stack.northwind}/.well-known/poppy.json").json()
    assert doc["auth"]["issuer"] == f"{stack.issuer}/demo"
    assert doc["extensions"]["operations"]["endpoint"] == f"{stack.ledger}/demo/operations", doc
    assert httpx.get(f"{stack.ledger}/healthz").status_code == 200
    # Each service said at start that it runs in dev mode (FRONTDOOR_ENV set by `make run`).
    for name in ("console", "issuer", "ledger", "worker", "beat", "deliverer"):
        log = (stack.data_dir / "logs" / f"{name}.log").read_text(errors="replace")
        assert '"event": "dev_mode"' in log and '"env_set": true' in log, (name, log[-2000:])


def test_the_demo_tenant_offers_device_sign_in_through_northwinds_login(stack: Stack) -> None:
    meta = httpx.get(f"{stack.issuer}/.well-known/oauth-authorization-server/demo").json()
    assert meta["device_authorization_endpoint"] == f"{stack.issuer}/demo/oauth/device"
    settings = httpx.get(f"{stack.console}/api/v1/issuer", headers=demo_auth(stack)).json()["settings"]
    assert settings["device"] == {"enabled": True, "scopes": ["orders:read", "poppy:read"]}
    # Direct Sign-In too, with the same scopes, so both can be tried by hand.
    assert meta["authorization_endpoint"] == f"{stack.issuer}/demo/oauth/authorize"
    assert settings["direct"] == {"enabled": True, "scopes": ["orders:read", "poppy:read"]}
    assert settings["login"]["url"] == f"{stack.northwind}/login"
    assert settings["login"]["jwks_uri"] == f"{stack.northwind}/.well-known/jwks.json"
    assert httpx.get(settings["login"]["jwks_uri"]).json()["keys"][0]["kty"] == "EC"


def test_health_and_readiness(stack: Stack) -> None:
    assert httpx.get(f"{stack.northwind}/healthz").status_code == 200
    for base in (stack.console, stack.issuer, stack.ledger):
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


# --- Device Sign-In over sockets --------------------------------------------------------


def demo_credentials(stack: Stack) -> dict[str, Any]:
    return dict(json.loads((stack.data_dir / "demo-credentials.json").read_text()))


def demo_auth(stack: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {demo_credentials(stack)['api_key']}"}


def northwind_password(stack: Stack) -> str:
    match = re.search(r"ada@northwind\.example\s+password (\S+)", "".join(stack.output))
    assert match, "".join(stack.output)
    return match.group(1)


def play_agent_module() -> ModuleType:
    """scripts/play_agent.py, the agent the README tells people to run (httpx + joserfc)."""
    spec = importlib.util.spec_from_file_location("play_agent", ROOT / "scripts" / "play_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Browser:
    """A person's browser: keeps cookies, follows redirects, submits the page's forms."""

    def __init__(self) -> None:
        self.http = httpx.Client(follow_redirects=True, timeout=10)

    def submit(self, page: httpx.Response, values: dict[str, str] | None = None,
               button: tuple[str, str] | None = None) -> httpx.Response:
        found = forms(page.text)
        assert found, f"no form on {page.url} ({page.status_code}): {page.text[:300]}"
        form = found[0]
        fields = {k: v for k, v in form.fields.items() if k}
        fields.update({k: [v] for k, v in (values or {}).items()})
        data = [(k, x) for k, xs in fields.items() for x in xs] + ([button] if button else [])
        return self.http.post(urljoin(str(page.url), html.unescape(form.action)), content=urlencode(data).encode(),
                              headers={"Content-Type": "application/x-www-form-urlencoded"})

    def approve_device(self, link: str, email: str, password: str) -> httpx.Response:
        """Open the agent's link, confirm the code, sign in at Northwind, allow."""
        page = self.http.get(link)
        assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
        login = self.submit(page)  # confirming the code leads to the company's login page
        assert login.status_code == 200 and 'name="password"' in login.text, login.text[:300]
        consent = self.submit(login, {"email": email, "password": password})
        if 'id="handoff"' in consent.text:  # no JavaScript here: press Continue
            consent = self.submit(consent)
        assert consent.status_code == 200 and "Allow" in consent.text, consent.text[:300]
        return self.submit(consent, button=("decision", "allow"))

    def approve_direct(self, link: str, email: str, password: str) -> httpx.Response:
        """Open the agent's authorization URL, sign in at Northwind, allow: back at the agent."""
        login = self.http.get(link)  # straight on to the company's login page
        assert login.status_code == 200 and 'name="password"' in login.text, login.text[:300]
        consent = self.submit(login, {"email": email, "password": password})
        if 'id="handoff"' in consent.text:  # no JavaScript here: press Continue
            consent = self.submit(consent)
        assert consent.status_code == 200 and "Allow" in consent.text, consent.text[:300]
        return self.submit(consent, button=("decision", "allow"))


def test_device_sign_in_end_to_end_then_disconnect(stack: Stack) -> None:
    play = play_agent_module()
    agent = play.Agent(name="E2E Agent")
    try:
        with httpx.Client(timeout=10) as http:
            issuer, meta = play.discover(http, stack.northwind)
            assert issuer == f"{stack.issuer}/demo"
            token_endpoint = meta["token_endpoint"]
            r = agent.token(http, issuer, token_endpoint, {"grant_type": play.JWT_BEARER,
                                                           "assertion": agent.session_assertion(issuer, "e2e-user")})
            assert r.status_code == 200, r.text
            session_id = r.json()["session_id"]
            signed_out = r.json()["access_token"]
            assert agent.call(http, "GET", f"{stack.northwind}/api/orders", signed_out).status_code == 403

            r = http.post(meta["device_authorization_endpoint"], data={**agent.client_auth(issuer),
                                                                       "scope": "orders:read"})
            assert r.status_code == 200, r.text
            device = r.json()
            assert device["verification_uri"] == f"{issuer}/device"

            def poll() -> httpx.Response:
                return agent.token(http, issuer, token_endpoint, {"grant_type": play.DEVICE_CODE,
                                                                  "device_code": device["device_code"],
                                                                  "session_id": session_id})

            assert poll().json()["error"] == "authorization_pending"
            done = Browser().approve_device(device["verification_uri_complete"], "ada@northwind.example",
                                            northwind_password(stack))
            assert done.status_code == 200 and "connected" in done.text, done.text[:300]

            deadline = time.monotonic() + 60
            while True:
                time.sleep(device["interval"] + 0.5)
                r = poll()
                if r.status_code == 200 or r.json()["error"] not in ("authorization_pending", "slow_down"):
                    break
                assert time.monotonic() < deadline
            assert r.status_code == 200, r.text
            signed = r.json()
            assert signed["signed_in"] is True and signed["scope"] == "orders:read"
            assert signed["session_id"] == session_id and signed["refresh_token"]
            token = signed["access_token"]

            orders = agent.call(http, "GET", f"{stack.northwind}/api/orders", token)
            assert orders.status_code == 200, orders.text
            assert [o["order_id"] for o in orders.json()] == ["ord_10391", "ord_10248"]  # Ada's, newest first

            # An operation end to end: Northwind proposes a reorder, the agent confirms it at the
            # ledger, the worker-free fast path calls Northwind's perform webhook, succeeded.
            logs_dir = stack.data_dir / "logs"
            assert play.reorder(http, agent, stack.northwind, token, approve=True), (
                (logs_dir / "northwind.log").read_text(errors="replace")[-3000:]
                + (logs_dir / "ledger.log").read_text(errors="replace")[-3000:])
            ledger = httpx.get(f"{stack.console}/api/v1/operations", headers=demo_auth(stack)).json()["data"]
            assert ledger[0]["operation"]["state"] == "succeeded", ledger[0]
            assert ledger[0]["account"] == "acct_ada" and ledger[0]["kind"] == "order.place"
            performed = (stack.data_dir / "logs" / "northwind.log").read_text(errors="replace")
            assert f"performed operation {ledger[0]['operation']['operation_id']}" in performed

            # Ada sees the agent on Northwind's own page.
            ada = Browser()
            page = ada.submit(ada.http.get(f"{stack.northwind}/account/agents"),
                              {"email": "ada@northwind.example", "password": northwind_password(stack)})
            assert "E2E Agent" in page.text, page.text[:500]

            r = httpx.post(f"{stack.console}/api/v1/accounts/acct_ada/disconnect", headers=demo_auth(stack))
            assert r.status_code == 200, r.text
            assert r.json()["sessions_signed_out"] == 1 and r.json()["tokens_revoked"] == 1

            after = agent.call(http, "GET", f"{stack.northwind}/api/orders", token)
            assert after.status_code == 403, after.text
            assert 'error="sign_in_required"' in after.headers["www-authenticate"]
            assert "E2E Agent" not in ada.http.get(f"{stack.northwind}/account/agents").text
            refresh = agent.token(http, issuer, token_endpoint, {"grant_type": "refresh_token",
                                                                 "refresh_token": signed["refresh_token"]})
            assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
    finally:
        agent.close()
    # Nothing secret reached any process's log file (issuer, console, Northwind, worker, beat).
    logs = "".join(f.read_text(errors="replace") for f in (stack.data_dir / "logs").glob("*.log"))
    secret = {"device code": device["device_code"], "user code": device["user_code"],
              "user code (typed)": device["user_code"].replace("-", ""), "Session Token": signed_out,
              "signed-in Session Token": token, "Account Token": signed["refresh_token"],
              "password": northwind_password(stack),
              "webhook secret": json.loads((stack.data_dir / "northwind-webhook.json").read_text())["secret"]}
    assert not [name for name, value in secret.items() if value in logs]


@pytest.mark.parametrize("direct", [False, True], ids=["device", "direct"])
def test_the_readme_agent_script_signs_in_and_notices_the_disconnect(stack: Stack, direct: bool) -> None:
    """``scripts/play_agent.py`` as the README runs it (``--direct`` too), with Grace in the browser."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "play_agent.py"), "--company", stack.northwind,
                             "--every", "1", *(["--direct"] if direct else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out: list[str] = []
    q: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, q, out), daemon=True).start()

    def wait_for(text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = q.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if text in line:
                return line
            assert proc.poll() is None or not q.empty(), "".join(out)
            assert time.monotonic() < deadline, "".join(out)

    try:
        if direct:
            link = wait_for("/demo/oauth/authorize?").strip()
            done = Browser().approve_direct(link, "grace@northwind.example", northwind_password(stack))
            assert "Back at the agent" in done.text, done.text[:300]
        else:
            link = wait_for("/device?user_code=").strip()
            done = Browser().approve_device(link, "grace@northwind.example", northwind_password(stack))
            assert "connected" in done.text
        assert "1 orders: ord_10307 (processing)" in wait_for("GET /api/orders -> 200")
        r = httpx.post(f"{stack.console}/api/v1/accounts/acct_grace/disconnect", headers=demo_auth(stack))
        assert r.status_code == 200 and r.json()["sessions_signed_out"] == 1
        wait_for("Signed out: the account disconnected this agent.")
        assert proc.wait(timeout=30) == 0, "".join(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


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
