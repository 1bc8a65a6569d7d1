"""A company's webhook receiver as a company would run it: Litestar under granian, the sdk's verifier.

    granian --interface asgi --workers 1 bench._receiver_app:app      (`AppReceiverProcess` starts it)

`bench/_receiver.py` is a raw asyncio server with its own HMAC check: it answers in a few
microseconds, so it measures the deliverer's ceiling, not a company. This one is what the
sdk's documentation (``frontdoor_sdk.webhooks``) and the Northwind example show a company
writing: a Litestar route that hands the body and headers to
``frontdoor_sdk.WebhookVerifier.verify`` (Standard Webhooks signature, time tolerance, body
parsed, ``webhook-id`` remembered in its in-process replay cache), answers ``401`` when it
refuses and ``200`` with a perform outcome otherwise. One granian worker, granian's default
event loop, as ``make run`` starts the services.

It records each delivery like the raw receiver (``[webhook-id, idempotency key or null,
arrival (time.monotonic()), verified]``) and has the same routes (``/hook/<name>``,
``/control/<name>``, ``/stats/<name>``, ``/reset/<name>``, ``/healthz``), so a bench can use
either. Its counters are kept as deliveries arrive: a ``/stats`` poll costs the receiver
nothing that grows with the records (the raw receiver's recount does).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontdoor_sdk import WebhookVerificationError, WebhookVerifier
from litestar import Litestar, Request, Response, get, post
from litestar.enums import MediaType

DEFAULT_ANSWER = b'{"outcome":"succeeded","result":{"summary":"Done"}}'
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Endpoint:
    verifier: WebhookVerifier | None = None
    status: int = 200
    body: bytes = DEFAULT_ANSWER
    records: list[list[Any]] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    by_key: dict[str, set[str]] = field(default_factory=dict)
    bad: int = 0

    def record(self, msg_id: str, key: str | None, at: float, ok: bool) -> None:
        self.records.append([msg_id, key, at, ok])
        self.ids.add(msg_id)
        if key is not None:
            self.by_key.setdefault(key, set()).add(msg_id)
        if not ok:
            self.bad += 1

    def stats(self, records: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "raw": len(self.records), "distinct_ids": len(self.ids), "bad_signatures": self.bad,
            "performs": len(self.by_key),
            "keys_with_several_ids": sorted(k for k, v in self.by_key.items() if len(v) > 1),
            # records are appended in arrival order (one worker, one loop)
            "first_arrival": self.records[0][2] if self.records else None,
            "last_arrival": self.records[-1][2] if self.records else None,
        }
        if records:
            out["records"] = self.records
        return out


ENDPOINTS: dict[str, Endpoint] = {}


def _endpoint(name: str) -> Endpoint:
    return ENDPOINTS.setdefault(name, Endpoint())


@post("/hook/{name:str}", status_code=200)
async def hook(name: str, request: Request[Any, Any, Any]) -> Response[bytes]:
    """A delivery, verified as a company's receiver verifies it (the sdk's `WebhookVerifier`)."""
    body = await request.body()
    at = time.monotonic()
    ep = _endpoint(name)
    key: str | None = None
    if ep.verifier is not None:
        try:
            event = await ep.verifier.verify(body, request.headers)
        except WebhookVerificationError as refused:
            ep.record(request.headers.get("webhook-id", ""), None, at, False)
            return Response(b'{"error":"invalid_webhook","reason":"%s"}' % refused.reason.encode(),
                            status_code=refused.status, media_type=MediaType.JSON)
        raw_key = event.data.get("idempotency_key")
        key = raw_key if isinstance(raw_key, str) else None
    ep.record(request.headers.get("webhook-id", ""), key, at, True)
    return Response(ep.body, status_code=ep.status, media_type=MediaType.JSON)


@post("/control/{name:str}", status_code=200)
async def control(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """``{"secret", "status", "body"}``, any subset (a new secret gets a new verifier)."""
    ep = _endpoint(name)
    if "secret" in data:
        ep.verifier = WebhookVerifier(data["secret"]) if data["secret"] else None
    ep.status = int(data.get("status", ep.status))
    if "body" in data:
        ep.body = str(data["body"]).encode()
    return {}


@get("/stats/{name:str}")
async def stats(name: str, records: int = 0) -> dict[str, Any]:
    return _endpoint(name).stats(bool(records))


@post("/reset/{name:str}", status_code=200)
async def reset(name: str) -> dict[str, Any]:
    """Forget the records of ``<name>`` (its secret and answer stay)."""
    ep = _endpoint(name)
    ep.records, ep.ids, ep.by_key, ep.bad = [], set(), {}, 0
    return {}


@get("/healthz")
async def healthz() -> dict[str, Any]:
    return {"status": "ok"}


app = Litestar(route_handlers=[hook, control, stats, reset, healthz], openapi_config=None)


class AppReceiverProcess:
    """Starts this app under granian (one worker) and talks to it; the interface of `ReceiverProcess`."""

    kind = "app"
    description = "Litestar under granian (1 worker), the sdk's WebhookVerifier"

    def __init__(self, log: str | None = None, *, timeout: float = 30.0) -> None:
        from bench._common import free_port

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        granian = str(Path(sys.executable).with_name("granian"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen(
            [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--no-ws", "bench._receiver_app:app"],
            env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid: int = self._proc.pid
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the app receiver did not start" + (f" (see {log})" if log else ""))
            time.sleep(0.1)

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        import json

        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers={"content-type": "application/json"} if data is not None else {})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def hook_url(self, name: str) -> str:
        return f"{self.base_url}/hook/{name}"

    def control(self, name: str, **conf: Any) -> None:
        self._call("POST", f"/control/{name}", conf)

    def stats(self, name: str, *, records: bool = False) -> dict[str, Any]:
        return self._call("GET", f"/stats/{name}" + ("?records=1" if records else ""))  # type: ignore[no-any-return]

    def reset(self, name: str) -> None:
        self._call("POST", f"/reset/{name}", {})

    def stop(self) -> None:
        from bench._common import stop_process_group

        stop_process_group(self._proc)  # type: ignore[arg-type]
