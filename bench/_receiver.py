"""A company's webhook receiver for benchmarks and end-to-end tests, in its own process.

    python bench/_receiver.py            (prints one JSON line: {"port": ..., "pid": ...})

A small HTTP/1.1 server on raw asyncio (keep-alive, ``Content-Length`` bodies only), so
it costs the measuring process nothing and answers in well under a millisecond. It
checks every Standard Webhooks signature itself (the specification's HMAC-SHA256, written
here from the spec rather than with Frontdoor's code) and records each delivery.

Routes (``<name>`` is any endpoint name the caller chooses):

* ``POST /hook/<name>``: a delivery. Recorded as ``[webhook-id, idempotency key or null,
  arrival (time.monotonic(), comparable across processes on Linux), signature ok]``;
  answered as configured (default ``200`` with a perform outcome ``succeeded``).
* ``POST /control/<name>``: JSON ``{"secret", "status", "delay", "body"}``, any subset.
* ``GET /stats/<name>`` (``?records=1`` adds every record): counts (``raw``,
  ``distinct_ids``, ``bad_signatures``, ``keys`` with ``performs`` = distinct idempotency
  keys, ``keys_with_several_ids`` = keys delivered under more than one webhook-id).
* ``POST /listener/<port>/down`` and ``/up``: close or reopen an extra listening port (a
  receiver that is really down: connections refused). ``POST /listener/0/up`` opens a new
  one and answers its port.
* ``POST /empty``: ``200 {}``, the baseline round trip.
* ``POST /reset/<name>``: forget the records of ``<name>``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ANSWER = b'{"outcome":"succeeded","result":{"summary":"Done"}}'


@dataclass
class Endpoint:
    secret: bytes | None = None
    status: int = 200
    delay: float = 0.0
    body: bytes = DEFAULT_ANSWER
    records: list[list[Any]] = field(default_factory=list)


def _secret_bytes(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"))


def signature_ok(secret: bytes | None, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks v1: HMAC-SHA256 over ``{id}.{timestamp}.{body}``, base64, any listed."""
    if secret is None:
        return True
    msg_id, ts, sigs = (headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts and sigs) or abs(time.time() - int(ts or 0)) > 300:
        return False
    expected = base64.b64encode(hmac.new(secret, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:].encode(), expected) for s in sigs.split())


def _idempotency_key(body: bytes) -> str | None:
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return None
    return data.get("idempotency_key") if isinstance(data, dict) else None


class Receiver:
    def __init__(self) -> None:
        self.endpoints: dict[str, Endpoint] = {}
        self.listeners: dict[int, asyncio.base_events.Server] = {}

    def endpoint(self, name: str) -> Endpoint:
        return self.endpoints.setdefault(name, Endpoint())

    def stats(self, name: str, records: bool) -> dict[str, Any]:
        ep = self.endpoint(name)
        ids = {r[0] for r in ep.records}
        by_key: dict[str, set[str]] = {}
        for r in ep.records:
            if r[1] is not None:
                by_key.setdefault(r[1], set()).add(r[0])
        out: dict[str, Any] = {
            "raw": len(ep.records), "distinct_ids": len(ids), "bad_signatures": sum(1 for r in ep.records if not r[3]),
            "performs": len(by_key), "keys_with_several_ids": sorted(k for k, v in by_key.items() if len(v) > 1),
            "first_arrival": min((r[2] for r in ep.records), default=None),
            "last_arrival": max((r[2] for r in ep.records), default=None),
        }
        if records:
            out["records"] = ep.records
        return out

    async def route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        now = time.monotonic()
        path, _, query = path.partition("?")
        parts = path.strip("/").split("/")
        if method == "POST" and parts[0] == "hook" and len(parts) == 2:
            ep = self.endpoint(parts[1])
            ep.records.append([headers.get("webhook-id", ""), _idempotency_key(body), now,
                               signature_ok(ep.secret, headers, body)])
            if ep.delay:
                await asyncio.sleep(ep.delay)
            return ep.status, ep.body
        if method == "POST" and parts[0] == "empty":
            return 200, b"{}"
        if method == "GET" and parts[0] == "stats" and len(parts) == 2:
            return 200, json.dumps(self.stats(parts[1], "records=1" in query)).encode()
        if method == "POST" and parts[0] == "control" and len(parts) == 2:
            ep, conf = self.endpoint(parts[1]), json.loads(body or b"{}")
            if "secret" in conf:
                ep.secret = _secret_bytes(conf["secret"])
            ep.status = int(conf.get("status", ep.status))
            ep.delay = float(conf.get("delay", ep.delay))
            if "body" in conf:
                ep.body = conf["body"].encode()
            return 200, b"{}"
        if method == "POST" and parts[0] == "reset" and len(parts) == 2:
            self.endpoint(parts[1]).records.clear()
            return 200, b"{}"
        if method == "POST" and parts[0] == "listener" and len(parts) == 3:
            port = int(parts[1])
            if parts[2] == "down" and port in self.listeners:
                server = self.listeners.pop(port)
                server.close()
                return 200, b"{}"
            if parts[2] == "up":
                server = await self.listen(port)
                return 200, json.dumps({"port": server.sockets[0].getsockname()[1]}).encode()
        return 404, b'{"error":"not_found"}'

    async def listen(self, port: int) -> asyncio.base_events.Server:
        server = await asyncio.start_server(self.serve, "127.0.0.1", port, reuse_address=True, backlog=1024)
        self.listeners[server.sockets[0].getsockname()[1]] = server
        return server

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                status, answer = await self.route(method, path, headers, body)
                close = headers.get("connection", "").lower() == "close"
                writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
                    status, len(answer), b"connection: close\r\n" if close else b"", answer))
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()


class ReceiverProcess:
    """Starts this module in its own process and talks to it (the caller's side)."""

    def __init__(self, log: str | None = None) -> None:
        import subprocess

        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, stderr=out,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        line = self._proc.stdout.readline() if self._proc.stdout else b""
        if not line:
            raise RuntimeError("the receiver did not start")
        info = json.loads(line)
        self.pid: int = info["pid"]
        self.port: int = info["port"]
        self.base_url = f"http://127.0.0.1:{self.port}"

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        import urllib.request

        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def hook_url(self, name: str, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}/hook/{name}"

    def control(self, name: str, **conf: Any) -> None:
        self._call("POST", f"/control/{name}", conf)

    def stats(self, name: str, *, records: bool = False) -> dict[str, Any]:
        return self._call("GET", f"/stats/{name}" + ("?records=1" if records else ""))  # type: ignore[no-any-return]

    def reset(self, name: str) -> None:
        self._call("POST", f"/reset/{name}", {})

    def open_port(self, port: int = 0) -> int:
        return int(self._call("POST", f"/listener/{port}/up", {})["port"])

    def close_port(self, port: int) -> None:
        self._call("POST", f"/listener/{port}/down", {})

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except Exception:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout:
            self._proc.stdout.close()


async def main() -> None:
    receiver = Receiver()
    server = await receiver.listen(int(os.environ.get("RECEIVER_PORT", "0")))
    print(json.dumps({"port": server.sockets[0].getsockname()[1], "pid": os.getpid()}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
