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
    args = p.parse_args(argv)
    company = args.company.rstrip("/")
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
