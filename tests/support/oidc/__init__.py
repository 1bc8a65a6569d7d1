"""A real OpenID Provider for the tests: panva's npm ``oidc-provider`` run by ``idp.mjs``.

`OpenIdProvider` starts it on a loopback port with keys and clients the test chooses
(installing the pinned package with ``npm ci`` first when ``node_modules`` is missing; a
missing Node.js fails the test, it is never skipped). `IdpInternet` is the issuer's
outbound network in these tests: the IdP through the SSRF-guarded stack over a real
socket, everything else the shared `MockWeb`; it can re-sign the IdP's ID token with
changed claims (``tamper``) to prove what Frontdoor refuses. `login_at_idp` plays the
user's browser at the IdP's interaction pages, `logout_at_idp` signs it out there
(RP-initiated logout's confirmation page), and `FrontdoorStandIn` is the back-channel
logout URI the IdP posts its logout tokens to and the client ``jwks_uri`` it fetches.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin

import httpx
from frontdoor_core.outbound import (
    AddressRules,
    GuardedNetworkBackend,
    GuardedTransport,
    OutboundPolicy,
    SystemResolver,
)
from frontdoor_core.outbound.guarded_transport import strict_ssl_context
from joserfc import jwt
from joserfc.jwk import RSAKey

HERE = Path(__file__).parent


def ensure_installed() -> None:
    """``npm ci`` the pinned provider once (CI runs it in ``.ci/run``; this covers a bare ``make test``)."""
    if (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    assert npm is not None, "Node.js and npm are needed for the OpenID Provider tests (apt-get install nodejs npm)"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, capture_output=True, timeout=300)


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})


class OpenIdProvider:
    """One running provider process; `restart` keeps the port (and so the issuer)."""

    def __init__(self, clients: list[dict[str, Any]], key: RSAKey, *, clock_control: bool = False) -> None:
        ensure_installed()
        self.clients, self.key, self.port = clients, key, 0
        self.clock_control = clock_control  # `set_clock` may move the provider's clock
        self._proc: subprocess.Popen[str] | None = None
        self.issuer = ""
        self.start()

    def start(self) -> None:
        node = shutil.which("node")
        assert node is not None, "Node.js is needed for the OpenID Provider tests"
        env = {"PATH": "/usr/bin:/bin", "IDP_PORT": str(self.port),
               "IDP_JWKS": json.dumps({"keys": [self.key.as_dict(private=True)]}),
               "IDP_CLIENTS": json.dumps(self.clients)}
        if self.clock_control:
            env["IDP_CLOCK_CONTROL"] = "1"
        self._proc = subprocess.Popen([node, "idp.mjs"], cwd=HERE, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        assert line, "the OpenID Provider did not start"
        self.issuer = json.loads(line)["issuer"]
        self.port = int(self.issuer.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._proc = None

    def restart(self, key: RSAKey | None = None) -> None:
        """Stop and start again on the same port, signing with ``key`` from now on (a rotation)."""
        self.stop()
        if key is not None:
            self.key = key
        self.start()

    async def set_clock(self, now: datetime) -> None:
        """The provider's clock reads ``now`` from here on (``clock_control`` only), moving with real time."""
        offset_ms = round((now - datetime.now(UTC)).total_seconds() * 1000)
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(f"{self.issuer}/__test/clock", json={"offset_ms": offset_ms})
        assert r.status_code == 204, f"the OpenID Provider did not take the clock: {r.status_code}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


Tamper = Callable[[dict[str, Any]], dict[str, Any]]


class IdpInternet(httpx.AsyncBaseTransport):
    """The issuer's outbound network: the IdP over a real (guarded) socket, the rest ``web``
    (the shared `MockWeb`, or the conformance harness's in-process network)."""

    def __init__(self, web: httpx.AsyncBaseTransport, policy: OutboundPolicy) -> None:
        self.web = web
        self.idps: dict[str, OpenIdProvider] = {}
        self.real = GuardedTransport(GuardedNetworkBackend(AddressRules(policy), SystemResolver()),
                                     strict_ssl_context(None))
        self.tamper: Tamper | None = None
        self.sign_with: RSAKey | None = None  # tamper: a key other than the IdP's (a forgery)
        self.token_requests: list[httpx.Request] = []
        self.id_tokens: list[str] = []  # as the IdP answered them

    def add(self, idp: OpenIdProvider) -> None:
        self.idps[idp.host] = idp

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        idp = self.idps.get(f"{request.url.host}:{request.url.port}")
        if idp is None:
            return await self.web.handle_async_request(request)
        response = await self.real.handle_async_request(request)
        if not request.url.path.endswith("/token"):
            return response
        await request.aread()
        self.token_requests.append(request)
        body = await response.aread()
        if response.status_code == 200:
            self.id_tokens.append(str(json.loads(body).get("id_token", "")))
        if self.tamper is None or response.status_code != 200:
            return httpx.Response(response.status_code, headers=response.headers, content=body)
        tokens = json.loads(body)
        claims = jwt.decode(tokens["id_token"], idp.key).claims
        key = self.sign_with or idp.key
        tokens["id_token"] = jwt.encode({"alg": "RS256", "kid": idp.key.kid}, self.tamper(dict(claims)), key)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=json.dumps(tokens).encode())


async def login_at_idp(location: str, *, login: str, stop_at: str, cancel: bool = False,
                       browser: httpx.AsyncClient | None = None, password: str = "x") -> str:
    """Play the user at the IdP from its authorization URL until it redirects to ``stop_at``.

    Logs in as ``login`` on the devInteractions form (``password``: any, unless the IdP was
    started with ``IDP_USERS``) and consents; with
    ``cancel`` aborts at the login prompt instead. Returns the redirect URL to Frontdoor.
    With ``browser`` (its cookies: the user's session at the IdP) a user already signed
    in there is not asked again; without, a fresh browser each time.
    """
    if browser is None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=10) as fresh:
            return await login_at_idp(location, login=login, stop_at=stop_at, cancel=cancel, browser=fresh,
                                      password=password)
    r = await browser.get(location)
    for _ in range(12):
        loc = urljoin(str(r.url), r.headers["location"])
        if loc.startswith(stop_at):
            return loc
        if "/interaction/" in loc and not loc.endswith(("/login", "/confirm", "/abort")):
            page = (await browser.get(loc)).text
            action = urljoin(loc, re.search(r'action="([^"]+)"', page).group(1))  # type: ignore[union-attr]
            prompt = re.search(r'name="prompt" value="(\w+)"', page).group(1)  # type: ignore[union-attr]
            if cancel:
                r = await browser.get(loc.rstrip("/") + "/abort")
            elif prompt == "login":
                r = await browser.post(action, data={"prompt": "login", "login": login, "password": password})
                assert r.status_code == 303, f"the IdP refused the login: {r.status_code}"
            else:
                r = await browser.post(action, data={"prompt": prompt})
        else:
            r = await browser.get(loc)
    raise AssertionError(f"the IdP never redirected to {stop_at}")


async def logout_at_idp(browser: httpx.AsyncClient, idp: OpenIdProvider) -> None:
    """The user signs out at the IdP (``/session/end``, "Yes, sign me out"): the IdP then posts
    a logout token to the back-channel logout URI of every client the session signed in to."""
    page = await browser.get(f"{idp.issuer}/session/end")
    assert page.status_code == 200, page.text
    xsrf = re.search(r'name="xsrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    action = re.search(r'action="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    done = await browser.post(urljoin(str(page.url), action), data={"xsrf": xsrf, "logout": "yes"})
    assert done.status_code in (200, 303), done.text


class FrontdoorStandIn:
    """A loopback HTTP server standing for the Frontdoor URIs the IdP calls itself.

    Frontdoor's issuer runs in process in these tests, where the IdP's server cannot reach
    it. At `logout_url` (the back-channel logout URI) the stand-in answers ``200`` and keeps
    each ``logout_token`` for the test to deliver to the issuer as it came. At `jwks_url`
    (the client's ``jwks_uri``) it answers what the issuer's ``/oidc/jwks.json`` answered
    when the test last passed it to `serve_jwks` (body and ``Cache-Control`` as they were):
    the issuer cannot be asked live from this thread while it waits on the IdP.
    """

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.jwks_fetches = 0
        self._jwks: httpx.Response | None = None
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                form = parse_qs(self.rfile.read(length).decode("ascii"))
                stand_in.tokens.extend(form.get("logout_token", []))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                if stand_in._jwks is None or not self.path.startswith("/jwks.json"):
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                answer = stand_in._jwks
                stand_in.jwks_fetches += 1
                self.send_response(answer.status_code)
                for name in ("content-type", "cache-control"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.logout_url, self.jwks_url = f"{base}/backchannel-logout", f"{base}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def serve_jwks(self, answer: httpx.Response) -> None:
        """Answer `jwks_url` from now on as the issuer answered ``answer`` (its ``/oidc/jwks.json``)."""
        self._jwks = answer

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
