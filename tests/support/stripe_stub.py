"""Stripe offline for tests: `localstripe` in a subprocess, fronted by a small stub.

`LocalStripe` runs the real fake (``localstripe``, pinned in requirements/constraints.txt)
on a free loopback port: customers, products, plans, subscriptions, invoices and its own
signed webhook deliveries. `StripeStub` is what the app's ``STRIPE_API_BASE`` points at:
it answers the three things localstripe lacks (Checkout Sessions, Customer Portal
sessions, Billing Meter events) and forwards every other request, bytes unchanged, to
localstripe. So the app talks to one Stripe through its one gateway
(`frontdoor_billing.gateway`), and only that edge is stubbed.

The stub's Checkout page (``GET /pay/{id}``, a form; ``POST`` completes it) subscribes the
customer in localstripe to the Checkout's price (a localstripe plan of the same id), then
POSTs a ``checkout.session.completed`` event signed with the webhook secret to the app,
and redirects to the ``success_url``, as Stripe does. Meter events are kept as Stripe
keeps them: once per ``identifier``, whatever is resent.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import stripe

__all__ = ["LocalStripe", "MeterEvent", "StripeStub", "free_port", "signed_post"]

API_KEY = "sk_test_frontdoor_tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def signed_post(url: str, event: dict[str, Any], secret: str, *, timestamp: int | None = None) -> int:
    """POST ``event`` to ``url`` signed like Stripe (``Stripe-Signature: t=..,v1=..``); the status."""
    payload = json.dumps(event)
    header = stripe.WebhookSignature.generate_signature_header(payload, secret, timestamp=timestamp)
    req = urllib.request.Request(url, data=payload.encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Stripe-Signature": header})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


class LocalStripe:
    """``localstripe --port N --from-scratch`` until `stop`.

    localstripe pickles its whole store to ``/tmp/localstripe.pickle`` after each POST
    (nobody here reads it: ``--from-scratch`` skips loading it).
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalStripe:
        exe = Path(sys.executable).with_name("localstripe")
        self._proc = subprocess.Popen([str(exe), "--port", str(self.port), "--from-scratch"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"localstripe exited with {self._proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("localstripe did not start")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._proc = None

    def client(self) -> stripe.StripeClient:
        """The real SDK, talking to localstripe directly (for test set-up and assertions)."""
        return stripe.StripeClient(API_KEY, base_addresses={"api": self.url}, max_network_retries=0)  # type: ignore[typeddict-item]

    def deliver_webhooks_to(self, name: str, url: str, secret: str) -> None:
        """localstripe's own signed deliveries of every event to ``url``."""
        body = urllib.parse.urlencode({"url": url, "secret": secret}).encode()
        req = urllib.request.Request(f"{self.url}/_config/webhooks/{name}", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=5):
            pass


@dataclass
class MeterEvent:
    event_name: str
    identifier: str
    customer: str
    value: int
    timestamp: int


@dataclass
class _Checkout:
    id: str
    customer: str
    client_reference_id: str
    price: str
    metadata: dict[str, str]
    success_url: str
    cancel_url: str
    completed: bool = False


def _form(body: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode(), keep_blank_values=True).items()}


@dataclass
class StripeStub:
    """Checkout, the Portal and meter events; the rest forwarded to ``upstream`` (localstripe)."""

    upstream: LocalStripe
    webhook_url: str = ""
    webhook_secret: str = ""
    meter_events: dict[str, MeterEvent] = field(default_factory=dict)
    meter_posts: list[str] = field(default_factory=list)
    fail_meter_events_after: int | None = None
    checkouts: dict[str, _Checkout] = field(default_factory=dict)
    portal_sessions: list[dict[str, str]] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> StripeStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path.startswith("/pay/"):
                    self._send(200, stub.checkout_page(path[5:]).encode(), "text/html; charset=utf-8")
                elif path.startswith("/portal/"):
                    self._send(200, b"<h1>Stripe Customer Portal (test stub)</h1>", "text/html; charset=utf-8")
                else:
                    self._forward(b"")

            def do_DELETE(self) -> None:
                self._forward(self._body())

            def do_POST(self) -> None:
                path, body = self.path.split("?")[0], self._body()
                if path == "/v1/checkout/sessions":
                    self._send(200, json.dumps(stub.create_checkout(_form(body))).encode())
                elif path == "/v1/billing_portal/sessions":
                    self._send(200, json.dumps(stub.create_portal(_form(body))).encode())
                elif path == "/v1/billing/meter_events":
                    status, answer = stub.record_meter_event(_form(body))
                    self._send(status, json.dumps(answer).encode())
                elif path.startswith("/pay/"):
                    self._send(303, b"", headers={"Location": stub.complete_checkout(path[5:])})
                else:
                    self._forward(body)

            def _forward(self, body: bytes) -> None:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("authorization", "content-type", "stripe-version", "idempotency-key")}
                req = urllib.request.Request(stub.upstream.url + self.path, data=body or None,
                                             method=self.command, headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=20) as r:
                        self._send(r.status, r.read(), r.headers.get("Content-Type", "application/json"))
                except urllib.error.HTTPError as exc:
                    self._send(exc.code, exc.read(), exc.headers.get("Content-Type", "application/json"))

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="stripe-stub").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ------------------------------------------------------------ Checkout and the Portal

    def create_checkout(self, f: dict[str, str]) -> dict[str, Any]:
        # Globally unique, like Stripe's: two stubs (the integration and the browser tests) write
        # their events into one database per test worker, and a repeated event id is a duplicate.
        n = f"{next(self._ids)}_{secrets.token_hex(8)}"
        cs = _Checkout(id=f"cs_test_{n}", customer=f.get("customer", ""),
                       client_reference_id=f.get("client_reference_id", ""), price=f.get("line_items[0][price]", ""),
                       metadata={k[len("subscription_data[metadata]["):-1]: v for k, v in f.items()
                                 if k.startswith("subscription_data[metadata][")},
                       success_url=f.get("success_url", ""), cancel_url=f.get("cancel_url", ""))
        with self._lock:
            self.checkouts[cs.id] = cs
        return {"id": cs.id, "object": "checkout.session", "mode": f.get("mode"), "customer": cs.customer,
                "client_reference_id": cs.client_reference_id, "status": "open", "url": f"{self.url}/pay/{cs.id}"}

    def checkout_page(self, cs_id: str) -> str:
        cs = self.checkouts.get(cs_id)
        if cs is None:
            return "<h1>No such Checkout Session</h1>"
        return ("<!doctype html><title>Checkout (test stub)</title><h1>Subscribe</h1>"
                f"<p>Price <code>{html.escape(cs.price)}</code></p>"
                f"<form method=post action='/pay/{html.escape(cs.id)}'><button type=submit>Pay and subscribe</button></form>"
                f"<a href='{html.escape(cs.cancel_url)}'>Cancel</a>")

    def complete_checkout(self, cs_id: str) -> str:
        """Pay: a localstripe subscription, then a signed ``checkout.session.completed``; the success URL."""
        cs = self.checkouts[cs_id]
        client = self.upstream.client()
        pm = client.v1.payment_methods.create(params={"type": "card", "card": {
            "number": "4242424242424242", "exp_month": 12, "exp_year": 2040, "cvc": "123"}})
        client.v1.payment_methods.attach(pm.id, params={"customer": cs.customer})
        client.v1.customers.update(cs.customer, params={"invoice_settings": {"default_payment_method": pm.id}})
        sub = client.v1.subscriptions.create(params={"customer": cs.customer, "items": [{"plan": cs.price}],
                                                     "metadata": cs.metadata})
        cs.completed = True
        event = {"id": f"evt_{cs.id}", "object": "event", "created": int(time.time()), "livemode": False,
                 "type": "checkout.session.completed", "api_version": "2026-10-28.endive",
                 "data": {"object": {"id": cs.id, "object": "checkout.session", "mode": "subscription",
                                     "customer": cs.customer, "subscription": sub.id,
                                     "client_reference_id": cs.client_reference_id, "status": "complete",
                                     "payment_status": "paid"}}}
        if self.webhook_url:
            status = signed_post(self.webhook_url, event, self.webhook_secret)
            assert status == 200, f"the app refused checkout.session.completed: {status}"
        return cs.success_url

    def create_portal(self, f: dict[str, str]) -> dict[str, Any]:
        n = next(self._ids)
        with self._lock:
            self.portal_sessions.append({"customer": f.get("customer", ""), "return_url": f.get("return_url", "")})
        return {"id": f"bps_{n}", "object": "billing_portal.session", "customer": f.get("customer"),
                "return_url": f.get("return_url"), "url": f"{self.url}/portal/bps_{n}"}

    # ------------------------------------------------------------ Billing Meters

    def record_meter_event(self, f: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.fail_meter_events_after is not None and len(self.meter_posts) >= self.fail_meter_events_after:
                return 500, {"error": {"type": "api_error", "message": "stub: Stripe is down"}}
            identifier = f.get("identifier") or f"mev_{next(self._ids)}"
            self.meter_posts.append(identifier)
            event = MeterEvent(event_name=f.get("event_name", ""), identifier=identifier,
                               customer=f.get("payload[stripe_customer_id]", ""),
                               value=int(f.get("payload[value]", "0")), timestamp=int(f.get("timestamp", "0")))
            self.meter_events.setdefault(identifier, event)  # Stripe keeps an identifier once
        return 200, {"object": "billing.meter_event", "event_name": event.event_name, "identifier": identifier,
                     "payload": {"stripe_customer_id": event.customer, "value": str(event.value)},
                     "timestamp": event.timestamp, "created": int(time.time()), "livemode": False}
