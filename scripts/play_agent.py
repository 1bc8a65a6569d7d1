#!/usr/bin/env python3
"""Play a personal agent against ``make run``: Device (or Direct) Sign-In, then Northwind's orders.

    .venv/bin/python scripts/play_agent.py --company http://127.0.0.1:8003
    .venv/bin/python scripts/play_agent.py --company http://127.0.0.1:8003 --direct

1. serves its own Client ID Metadata Document and JWKS on a loopback port (dev mode
   accepts ``http://`` loopback agents), with a fresh ES256 identity key and DPoP key;
2. finds the company's issuer in its ``poppy.json`` and the endpoints in the issuer metadata;
3. starts a Session (signed out), asks for a device code and prints the link to open;
4. polls the token endpoint until you have signed in at Northwind and consented;
   with ``--direct`` (Direct Sign-In, PAP §4.5) it instead prints an authorization URL
   (``{issuer}/oauth/authorize`` with PKCE ``S256`` and a ``state``), waits for your
   browser to come back to its ``redirect_uri`` with ``code``, ``state`` and ``iss``, and
   redeems the code (the ``authorization_code`` grant with ``code_verifier``);
5. calls ``GET /api/orders`` with the Session Token and a DPoP proof, then again every
   ``--every`` seconds until the company answers ``403 sign_in_required`` (disconnect the
   agent to see it) or you press Ctrl-C;
6. with ``--reorder``, first asks Northwind to reorder the account's last order: Northwind
   answers ``202`` with an *operation* (Operations extension), the agent shows you its
   summary and asks for your approval, then confirms it at Frontdoor's operations endpoint
   (from ``poppy.json``); Frontdoor calls Northwind's perform webhook (see Northwind's log)
   and the agent prints the outcome: proposed → in_progress → succeeded.

With ``--profile 1.0`` it plays a PAP 1.0 agent instead (ADR 0004): no Session at the
token endpoint; it names its Session (``sid``) and signs a fresh ``Poppy-Session`` JWT for
every request with a short-lived delegated key its identity key vouches for:

1. discovers all three documents (``poppy.json``, the domain's
   ``/.well-known/oauth-protected-resource``, the issuer's RFC 8414 metadata) and checks
   that they point at each other;
2. calls ``GET /api/orders`` signed out (only the ``Poppy-Session`` header): the company
   answers ``401 sign_in_required``;
3. signs in by Device Sign-In (no ``session_id``: 1.0 sign-in is independent of the
   Session) and gets an access token and a refresh token;
4. with ``--reorder``, reorders and confirms the operation as above, each request with the
   Session JWT and the access token (bound by ``ath``);
5. reads its orders, then signs out (RFC 7009 revocation of the refresh token): the access
   token is refused from the next request on, the Session goes on signed out;
6. with ``--console`` and ``--api-key`` (the demo tenant's, from the ``make run`` banner),
   blocks and unblocks itself through the management API, which ends its Sessions: the
   next request answers ``400 session_ended``, and the agent starts a new ``sid`` and
   retries once.

    .venv/bin/python scripts/play_agent.py --profile 1.0 --reorder --yes \
        --console http://127.0.0.1:8000 --api-key fdk_...

Only the standard library, httpx and joserfc: what any agent would use.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import queue
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from joserfc import jwt
from joserfc.jwk import ECKey
from joserfc.jws import JWSRegistry
from joserfc.registry import HeaderParameter

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Agent:
    """An agent's identity, its published documents and what it signs."""

    def __init__(self, name: str = "Play Agent") -> None:
        self.name = name
        self.key = ECKey.generate_key("P-256", parameters={"use": "sig", "alg": "ES256"})
        self.dpop_key = ECKey.generate_key("P-256")
        self.nonce: str | None = None
        self.callbacks: queue.Queue[dict[str, str]] = queue.Queue()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.origin = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.client_id = f"{self.origin}/agent.json"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _documents(self) -> dict[str, dict[str, Any]]:
        public = {**self.key.as_dict(private=False), "kid": self.key.thumbprint(), "use": "sig", "alg": "ES256"}
        return {
            "/agent.json": {"client_id": self.client_id, "client_name": self.name,
                            "jwks_uri": f"{self.origin}/jwks.json", "redirect_uris": [f"{self.origin}/callback"],
                            "token_endpoint_auth_method": "private_key_jwt",
                            # It can approve operations (Operations extension v1).
                            "extensions": {"operations": {"version": "1"}}},
            "/jwks.json": {"keys": [public]},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/callback":  # Direct Sign-In: the browser comes back here
                    agent.callbacks.put(dict(parse_qsl(query)))
                    page = b"<!doctype html><title>Done</title><p>Back at the agent: you can close this tab.</p>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                doc = agent._documents().get(self.path)
                body = json.dumps(doc).encode()
                self.send_response(200 if doc else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler

    def _sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode({"alg": "ES256", "kid": self.key.thumbprint()}, claims, self.key)

    def client_auth(self, issuer: str) -> dict[str, str]:
        now = int(time.time())
        assertion = self._sign({"iss": self.client_id, "sub": self.client_id, "aud": issuer, "iat": now,
                                "exp": now + 60, "jti": secrets.token_urlsafe(16)})
        return {"client_id": self.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
                "client_assertion": assertion}

    def session_assertion(self, issuer: str, user_id: str) -> str:
        now = int(time.time())
        return self._sign({"iss": self.client_id, "sub": user_id, "aud": issuer, "iat": now, "exp": now + 120,
                           "jti": secrets.token_urlsafe(16)})

    def dpop(self, method: str, url: str, token: str | None = None, nonce: str | None = None) -> str:
        claims: dict[str, Any] = {"htm": method, "htu": url, "iat": int(time.time()), "jti": secrets.token_urlsafe(16)}
        if token is not None:
            claims["ath"] = _b64(hashlib.sha256(token.encode()).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.dpop_key.as_dict(private=False)}
        return jwt.encode(header, claims, self.dpop_key)

    def token(self, http: httpx.Client, issuer: str, token_endpoint: str, form: dict[str, str]) -> httpx.Response:
        """One token request; retried once with the server's DPoP nonce when it asks for one."""
        for _ in range(2):
            r = http.post(token_endpoint, data={**self.client_auth(issuer), **form},
                          headers={"DPoP": self.dpop("POST", token_endpoint, nonce=self.nonce)})
            self.nonce = r.headers.get("DPoP-Nonce", self.nonce)
            if not (r.status_code == 400 and r.json().get("error") == "use_dpop_nonce"):
                break
        return r

    def call(self, http: httpx.Client, method: str, url: str, session_token: str) -> httpx.Response:
        """An API call with the Session Token and a DPoP proof (``htu`` without the query)."""
        htu = url.split("?", 1)[0]
        nonce = None
        for _ in range(2):
            r = http.request(method, url, headers={"Authorization": f"DPoP {session_token}",
                                                   "DPoP": self.dpop(method, htu, session_token, nonce)})
            nonce = r.headers.get("DPoP-Nonce")
            if not (r.status_code == 401 and nonce and "use_dpop_nonce" in r.headers.get("WWW-Authenticate", "")):
                break
        return r


def discover(http: httpx.Client, company: str) -> tuple[str, dict[str, Any]]:
    """The company's issuer (from its poppy.json) and that issuer's RFC 8414 metadata."""
    issuer = http.get(f"{company}/.well-known/poppy.json").raise_for_status().json()["auth"]["issuer"]
    parts = urlsplit(issuer)
    meta = http.get(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}")
    return issuer, meta.raise_for_status().json()


def refusal(r: httpx.Response) -> str:
    challenge = r.headers.get("WWW-Authenticate", "")
    try:
        return str(r.json().get("error") or challenge)
    except ValueError:
        return challenge or r.text[:100]


def device_sign_in(http: httpx.Client, agent: Agent, issuer: str, meta: dict[str, Any], *, scope: str,
                   session_id: str) -> httpx.Response | str:
    """Device Sign-In (PAP §4.6): the token response, or why it failed."""
    device_endpoint = meta.get("device_authorization_endpoint") or f"{issuer}/oauth/device"
    r = http.post(device_endpoint, data={**agent.client_auth(issuer), "scope": scope})
    if r.status_code != 200:
        return f"Could not start Device Sign-In: {r.status_code} {refusal(r)}"
    device = r.json()
    print("Open this link in a browser, sign in at the company and allow access:", flush=True)
    print(f"  {device['verification_uri_complete']}", flush=True)
    print(f"  (or open {device['verification_uri']} and enter {device['user_code']})", flush=True)
    interval = int(device.get("interval", 5))
    deadline = time.monotonic() + int(device.get("expires_in", 600))
    while True:
        time.sleep(interval)
        r = agent.token(http, issuer, meta["token_endpoint"], {"grant_type": DEVICE_CODE,
                                                               "device_code": device["device_code"],
                                                               "session_id": session_id})
        error = None if r.status_code == 200 else refusal(r)
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending" or time.monotonic() > deadline:
            break
    return r if error is None else f"Sign-in did not complete: {error}"


def direct_sign_in(http: httpx.Client, agent: Agent, issuer: str, meta: dict[str, Any], *, scope: str,
                   session_id: str, wait: float = 600) -> httpx.Response | str:
    """Direct Sign-In (PAP §4.5): authorize URL, the browser's return, the code redeemed."""
    endpoint = meta.get("authorization_endpoint")
    if not endpoint:
        return "The issuer does not offer Direct Sign-In (no authorization_endpoint)."
    verifier = secrets.token_urlsafe(48)
    state = secrets.token_urlsafe(16)
    redirect_uri = f"{agent.origin}/callback"
    query = {"response_type": "code", "client_id": agent.client_id, "redirect_uri": redirect_uri, "scope": scope,
             "state": state, "code_challenge_method": "S256",
             "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest())}
    print("Open this link in a browser, sign in at the company and allow access:", flush=True)
    print(f"  {endpoint}?{urlencode(query)}", flush=True)
    try:
        back = agent.callbacks.get(timeout=wait)
    except queue.Empty:
        return "Sign-in did not complete: the browser did not come back in time."
    if back.get("state") != state or back.get("iss") != issuer:
        return "Sign-in did not complete: the redirect's state or iss is not ours."
    if "code" not in back:
        return f"Sign-in did not complete: {back.get('error', 'no code')}"
    return agent.token(http, issuer, meta["token_endpoint"], {
        "grant_type": "authorization_code", "code": back["code"], "code_verifier": verifier,
        "redirect_uri": redirect_uri, "session_id": session_id})


def reorder(http: httpx.Client, agent: Agent, company: str, session_token: str, *, approve: bool) -> bool:
    """Propose a reorder at Northwind, get the user's approval, confirm it at the operations endpoint."""
    doc = http.get(f"{company}/.well-known/poppy.json").raise_for_status().json()
    endpoint = ((doc.get("extensions") or {}).get("operations") or {}).get("endpoint")
    if not endpoint:
        print("The company lists no operations endpoint in its poppy.json.", flush=True)
        return False
    r = agent.call(http, "POST", f"{company}/api/orders/reorder", session_token)
    if r.status_code != 202:
        print(f"POST /api/orders/reorder -> {r.status_code} {refusal(r)}", flush=True)
        return False
    op = r.json()["operation"]
    print(f"POST /api/orders/reorder -> 202: operation {op['operation_id']} is {op['state']}", flush=True)
    print(f"  Northwind asks: {op['summary']}", flush=True)
    if not approve and input("  Approve it? [y/N] ").strip().lower() not in {"y", "yes"}:
        cancel = agent.call(http, "POST", f"{endpoint}/{op['operation_id']}/cancel", session_token)
        print(f"Not approved: POST .../cancel -> {cancel.status_code}, {cancel.json().get('state')}", flush=True)
        return True
    url = f"{endpoint}/{op['operation_id']}/confirm"
    body = json.dumps({"revision": op["revision"], "approved_by": "user"})
    r = http.post(url, content=body, headers={"Authorization": f"DPoP {session_token}", "Content-Type": "application/json",
                                              "DPoP": agent.dpop("POST", url, session_token)})
    if r.status_code != 200:
        print(f"Confirm -> {r.status_code} {refusal(r)}", flush=True)
        return False
    current = r.json()
    print(f"Confirmed revision {op['revision']}: {current['state']}", flush=True)
    while current["state"] == "in_progress":
        time.sleep(float(r.headers.get("Retry-After", "2")))
        r = agent.call(http, "GET", f"{endpoint}/{op['operation_id']}", session_token)
        current = r.json()
        print(f"  still {current['state']}", flush=True)
    print(f"Outcome: {current['state']}: {(current.get('result') or {}).get('summary')}", flush=True)
    return True


# ------------------------------------------------------------------------------------------ PAP 1.0

_SESSION_HEADERS = JWSRegistry(header_registry={"poppy_dlg": HeaderParameter("PAP delegation", "str")})


class DelegatedAgent(Agent):
    """A PAP 1.0 agent: an identity key behind its CIMD, a delegated key, a Session it names."""

    def __init__(self, name: str = "Play Agent (PAP 1.0)", *, user_id: str) -> None:
        super().__init__(name)
        self.user_id = user_id
        self.sid = secrets.token_urlsafe(24)  # >= 128 random bits [S §3]
        self.access_token: str | None = None
        self.refresh_token: str | None = None
        self.rotate()

    def rotate(self) -> None:
        """A fresh delegated P-256 key and a delegation of it, valid for an hour (at most 24 h)."""
        self.delegated = ECKey.generate_key("P-256")
        now = int(time.time())
        self.delegation = jwt.encode(
            {"typ": "poppy-delegation+jwt", "alg": "ES256", "kid": self.key.thumbprint()},
            {"iss": self.client_id, "cnf": {"jwk": self.delegated.as_dict(private=False)}, "iat": now,
             "exp": now + 3600, "jti": secrets.token_urlsafe(16)}, self.key)

    def new_session(self) -> None:
        self.sid = secrets.token_urlsafe(24)

    def session_jwt(self, method: str, url: str, company_id: str) -> str:
        """A fresh Session JWT for one request (``htu`` without the query, ``ath`` when signed in)."""
        claims: dict[str, Any] = {"iss": self.client_id, "aud": company_id, "sid": self.sid, "sub": self.user_id,
                                  "htm": method, "htu": url.split("?", 1)[0].split("#", 1)[0],
                                  "iat": int(time.time()), "jti": secrets.token_urlsafe(16)}
        if self.access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(self.access_token.encode()).digest())
        header = {"typ": "poppy-session+jwt", "alg": "ES256", "kid": self.delegated.thumbprint(),
                  "poppy_dlg": self.delegation}
        return jwt.encode(header, claims, self.delegated, registry=_SESSION_HEADERS)

    def api(self, http: httpx.Client, method: str, url: str, company_id: str, body: Any = None) -> httpx.Response:
        """One API request; ``session_ended`` starts a new Session and retries once [S §4]."""
        for attempt in range(2):
            headers = {"Poppy-Session": self.session_jwt(method, url, company_id)}
            if self.access_token is not None:
                headers["Authorization"] = f"Bearer {self.access_token}"
            if body is not None:
                headers["Content-Type"] = "application/json"
            r = http.request(method, url, headers=headers,
                             content=json.dumps(body).encode() if body is not None else None)
            if attempt == 0 and r.status_code == 400 and _error(r) == "session_ended":
                old = self.sid
                self.new_session()
                print(f"  {method} {urlsplit(url).path} -> 400 session_ended: Session {old[:8]}... ended; "
                      f"retrying once in a new Session {self.sid[:8]}...", flush=True)
                continue
            return r
        return r

    def token(self, http: httpx.Client, issuer: str, token_endpoint: str, form: dict[str, str]) -> httpx.Response:
        r = http.post(token_endpoint, data={**self.client_auth(issuer), **form})
        if r.status_code == 200:
            answer = r.json()
            self.access_token = answer["access_token"]
            self.refresh_token = answer.get("refresh_token", self.refresh_token)
        return r


def _error(r: httpx.Response) -> str | None:
    try:
        value = r.json().get("error")
    except ValueError:
        return None
    return str(value) if value else None


def discover_1_0(http: httpx.Client, company: str, *, any_version: bool = False
                 ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``poppy.json``, the domain's protected-resource metadata and the issuer's metadata,
    each pointing at the others exactly [S §2]; raises ``ValueError`` naming the mismatch."""
    origin = company.rstrip("/")
    host = (urlsplit(origin).hostname or "").lower()
    doc = http.get(f"{origin}/.well-known/poppy.json").raise_for_status().json()
    # A development stack (http loopback) names the company's real domain in its documents:
    # the two checks needing that domain cannot hold there, and are skipped (said aloud).
    loopback = origin.startswith("http://") and host in ("127.0.0.1", "localhost", "::1")
    if loopback:
        print("(development stack on loopback: organization.domain and protected_resources not checked)",
              flush=True)
    if doc.get("protocol_version") != "1.0" and not any_version:
        raise ValueError(f"poppy.json names protocol_version {doc.get('protocol_version')!r}, which a 1.0 agent "
                         "must not use: publish 1.0 for the tenant (issuer settings, protocol.published), "
                         "or pass --any-version to try the 1.0 path anyway")
    if str((doc.get("organization") or {}).get("domain", "")).lower() != host and not loopback:
        raise ValueError("poppy.json names another domain")
    resource = http.get(f"{origin}/.well-known/oauth-protected-resource").raise_for_status().json()
    if resource.get("resource") != origin:
        raise ValueError("the protected-resource metadata names another resource")
    servers = resource.get("authorization_servers") or []
    declared = (doc.get("auth") or {}).get("issuer")
    if len(servers) == 1:
        issuer = servers[0]
    elif declared in servers:
        issuer = declared
    else:
        raise ValueError("no single issuer protects this domain")
    if declared is not None and declared != issuer:
        raise ValueError("poppy.json names another issuer than the protected-resource metadata")
    parts = urlsplit(issuer)
    meta = http.get(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}")
    meta = meta.raise_for_status().json()
    if meta.get("issuer") != issuer:
        raise ValueError("the issuer metadata names another issuer")
    if origin.lower() not in {str(p).lower() for p in meta.get("protected_resources") or []} and not loopback:
        raise ValueError("the issuer does not list this domain in protected_resources")
    if "refresh_token" not in (meta.get("grant_types_supported") or []):
        raise ValueError("the issuer does not offer refresh_token")
    return doc, resource, meta


def device_sign_in_1_0(http: httpx.Client, agent: DelegatedAgent, issuer: str, meta: dict[str, Any], *,
                       scope: str) -> str | None:
    """Device Sign-In without a Session (1.0 [S §5]); None when signed in, else why not."""
    r = http.post(meta["device_authorization_endpoint"], data={**agent.client_auth(issuer), "scope": scope})
    if r.status_code != 200:
        return f"Could not start Device Sign-In: {r.status_code} {refusal(r)}"
    device = r.json()
    print("Open this link in a browser, sign in at the company and allow access:", flush=True)
    print(f"  {device['verification_uri_complete']}", flush=True)
    print(f"  (or open {device['verification_uri']} and enter {device['user_code']})", flush=True)
    interval = int(device.get("interval", 5))
    deadline = time.monotonic() + int(device.get("expires_in", 600))
    while True:
        time.sleep(interval)
        r = agent.token(http, issuer, meta["token_endpoint"], {"grant_type": DEVICE_CODE,
                                                               "device_code": device["device_code"]})
        if r.status_code == 200:
            return None
        error = refusal(r)
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending" or time.monotonic() > deadline:
            return f"Sign-in did not complete: {error}"


def reorder_1_0(http: httpx.Client, agent: DelegatedAgent, company: str, company_id: str, doc: dict[str, Any], *,
                approve: bool) -> bool:
    endpoint = ((doc.get("extensions") or {}).get("operations") or {}).get("endpoint")
    if not endpoint:
        print("The company lists no operations endpoint in its poppy.json.", flush=True)
        return False
    r = agent.api(http, "POST", f"{company}/api/orders/reorder", company_id)
    if r.status_code != 202:
        print(f"POST /api/orders/reorder -> {r.status_code} {refusal(r)}", flush=True)
        return False
    op = r.json()["operation"]
    print(f"POST /api/orders/reorder -> 202: operation {op['operation_id']} is {op['state']}", flush=True)
    print(f"  Northwind asks: {op['summary']}", flush=True)
    if not approve and input("  Approve it? [y/N] ").strip().lower() not in {"y", "yes"}:
        cancel = agent.api(http, "POST", f"{endpoint}/{op['operation_id']}/cancel", company_id, body={})
        print(f"Not approved: POST .../cancel -> {cancel.status_code}, {cancel.json().get('state')}", flush=True)
        return True
    r = agent.api(http, "POST", f"{endpoint}/{op['operation_id']}/confirm", company_id,
                  body={"revision": op["revision"], "approved_by": "user"})
    if r.status_code != 200:
        print(f"Confirm -> {r.status_code} {refusal(r)}", flush=True)
        return False
    current = r.json()
    print(f"Confirmed revision {op['revision']}: {current['state']}", flush=True)
    while current["state"] == "in_progress":
        time.sleep(float(r.headers.get("Retry-After", "2")))
        r = agent.api(http, "GET", f"{endpoint}/{op['operation_id']}", company_id)
        current = r.json()
        print(f"  still {current['state']}", flush=True)
    print(f"Outcome: {current['state']}: {(current.get('result') or {}).get('summary')}", flush=True)
    return current["state"] == "succeeded"


def play_1_0(args: argparse.Namespace, company: str) -> int:
    """The PAP 1.0 journey (see the module docstring)."""
    agent = DelegatedAgent(user_id=args.user)
    try:
        with httpx.Client(timeout=10) as http:
            try:
                doc, _, meta = discover_1_0(http, company, any_version=args.any_version)
            except ValueError as exc:
                print(f"Discovery failed: {exc}", flush=True)
                return 1
            issuer = meta["issuer"]  # the company identifier: every Session JWT's aud [S §2]
            print(f"Agent {agent.client_id}, issuer {issuer} (PAP 1.0: three documents checked)", flush=True)
            print(f"Session {agent.sid[:8]}... for User ID {args.user} (named by the agent, signed out)", flush=True)
            r = agent.api(http, "GET", f"{company}/api/orders", issuer)
            print(f"GET /api/orders signed out -> {r.status_code} {refusal(r)}", flush=True)
            if r.status_code != 401 or _error(r) != "sign_in_required":
                return 1
            outcome = device_sign_in_1_0(http, agent, issuer, meta, scope=args.scope)
            if outcome is not None:
                print(outcome, flush=True)
                return 1
            print("Signed in: an access token (sent beside the Session JWT, bound by ath) and a refresh token",
                  flush=True)
            if args.reorder and not reorder_1_0(http, agent, company, issuer, doc, approve=args.yes):
                return 1
            r = agent.api(http, "GET", f"{company}/api/orders", issuer)
            if r.status_code != 200:
                print(f"GET /api/orders -> {r.status_code} {refusal(r)}", flush=True)
                return 1
            print(f"GET /api/orders -> 200, {len(r.json())} orders", flush=True)
            revoked_token = agent.access_token
            r = http.post(meta.get("revocation_endpoint") or f"{issuer}/oauth/revoke",
                          data={**agent.client_auth(issuer), "token": agent.refresh_token or "",
                                "token_type_hint": "refresh_token"})
            print(f"Signed out (revocation) -> {r.status_code}", flush=True)
            r = agent.api(http, "GET", f"{company}/api/orders", issuer)
            print(f"GET /api/orders with the old access token -> {r.status_code} {refusal(r)}", flush=True)
            agent.access_token = None  # do not sign in again unless the user asks [S §5]
            r = agent.api(http, "GET", f"{company}/api/orders", issuer)
            print(f"GET /api/orders signed out, same Session -> {r.status_code} {refusal(r)}", flush=True)
            if r.status_code != 401 or revoked_token is None:
                return 1
            if args.console and args.api_key:
                return _session_ended_recovery(http, agent, company, issuer, args)
            return 0
    except KeyboardInterrupt:
        return 0
    except httpx.HTTPError as exc:
        print(f"HTTP error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        agent.close()


def _session_ended_recovery(http: httpx.Client, agent: DelegatedAgent, company: str, issuer: str,
                            args: argparse.Namespace) -> int:
    """The company blocks then unblocks the agent (ending its Sessions); the agent recovers [S §4]."""
    api = f"{args.console.rstrip('/')}/api/v1/agents"
    auth = {"Authorization": f"Bearer {args.api_key}"}
    for action in ("block", "unblock"):
        r = http.post(f"{api}/{action}", json={"client_id": agent.client_id}, headers=auth)
        if r.status_code != 200:
            print(f"Could not {action} the agent: {r.status_code}", flush=True)
            return 1
    print("The company blocked and unblocked this agent: its Sessions ended.", flush=True)
    before = agent.sid
    r = agent.api(http, "GET", f"{company}/api/orders", issuer)
    print(f"GET /api/orders -> {r.status_code} {refusal(r)} in Session {agent.sid[:8]}...", flush=True)
    return 0 if agent.sid != before and r.status_code == 401 and _error(r) == "sign_in_required" else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--company", default="http://127.0.0.1:8003", help="the company's origin (its poppy.json)")
    p.add_argument("--scope", default="orders:read", help="the scopes to ask for, space-separated")
    p.add_argument("--user", default=f"player-{secrets.token_hex(4)}", help="the User ID the agent uses here")
    p.add_argument("--every", type=float, default=10.0, help="seconds between calls once signed in")
    p.add_argument("--once", action="store_true", help="stop after the first call to /api/orders")
    p.add_argument("--direct", action="store_true",
                   help="Direct Sign-In (authorize URL, redirect back, code) instead of Device Sign-In")
    p.add_argument("--reorder", action="store_true",
                   help="after signing in, reorder the last order: an operation you approve, Frontdoor performs")
    p.add_argument("--yes", action="store_true", help="with --reorder: approve without asking")
    p.add_argument("--profile", choices=("0.2", "1.0"), default="0.2",
                   help="the PAP version to speak: draft 0.2 Session Tokens (default) or 1.0 Poppy-Session JWTs")
    p.add_argument("--console", help="with --profile 1.0: the console's origin, to end the Sessions (block/unblock)")
    p.add_argument("--api-key", help="with --console: the tenant's management API key (fdk_...)")
    p.add_argument("--any-version", action="store_true",
                   help="with --profile 1.0: use a poppy.json naming another protocol_version (a real agent must not)")
    args = p.parse_args(argv)
    company = args.company.rstrip("/")
    if args.profile == "1.0":
        return play_1_0(args, company)
    agent = Agent()
    try:
        with httpx.Client(timeout=10) as http:
            issuer, meta = discover(http, company)
            token_endpoint = meta["token_endpoint"]
            print(f"Agent {agent.client_id}, issuer {issuer}", flush=True)
            r = agent.token(http, issuer, token_endpoint,
                            {"grant_type": JWT_BEARER, "assertion": agent.session_assertion(issuer, args.user)})
            if r.status_code != 200:
                print(f"Could not start a Session: {r.status_code} {refusal(r)}", flush=True)
                return 1
            session_id = r.json()["session_id"]
            print(f"Session {session_id} started for User ID {args.user} (signed out)", flush=True)
            sign_in = direct_sign_in if args.direct else device_sign_in
            outcome = sign_in(http, agent, issuer, meta, scope=args.scope, session_id=session_id)
            if isinstance(outcome, str):
                print(outcome, flush=True)
                return 1
            if outcome.status_code != 200:
                print(f"Sign-in did not complete: {outcome.status_code} {refusal(outcome)}", flush=True)
                return 1
            signed = outcome.json()
            session_token = signed["access_token"]
            print(f"Signed in: Session {signed['session_id']}, scope {signed.get('scope')}", flush=True)
            if args.reorder and not reorder(http, agent, company, session_token, approve=args.yes):
                return 1
            while True:
                r = agent.call(http, "GET", f"{company}/api/orders", session_token)
                if r.status_code == 200:
                    orders = r.json()
                    listed = ", ".join(f"{o['order_id']} ({o['status']})" for o in orders)
                    print(f"GET /api/orders -> 200, {len(orders)} orders: {listed}", flush=True)
                else:
                    print(f"GET /api/orders -> {r.status_code} {refusal(r)}", flush=True)
                    if r.status_code == 403 and "sign_in_required" in r.headers.get("WWW-Authenticate", r.text):
                        print("Signed out: the account disconnected this agent.", flush=True)
                        return 0
                    return 1
                if args.once:
                    return 0
                time.sleep(args.every)
    except KeyboardInterrupt:
        return 0
    except httpx.HTTPError as exc:
        print(f"HTTP error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        agent.close()


if __name__ == "__main__":
    raise SystemExit(main())
