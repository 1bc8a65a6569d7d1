"""bench/session_grant.py's wrk load generator: every pre-signed request is sent exactly once, refusals are counted.

Against a loopback HTTP server that records what it receives (no issuer): the Lua script wrk
runs must send each request once and in full (wrk calls ``request()`` once more than it sends,
to check the script, which once cost a request), count the answers, and stop.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import session_grant

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="needs the wrk binary (Debian: apt-get install wrk)")


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, refuse: set[bytes]) -> None:
        self.bodies: Counter[bytes] = Counter()
        self.dpops: Counter[str] = Counter()
        self.refuse = refuse
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Recorder

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(200, b'{"status":"ok","service":"issuer"}')

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.bodies[body] += 1
            self.server.dpops[self.headers["DPoP"]] += 1
        if self.path != "/t/oauth/token" or self.headers["Content-Type"] != "application/x-www-form-urlencoded":
            self._answer(404, b'{"error":"not_found"}')
        elif body in self.server.refuse:
            self._answer(400, json.dumps({"error": "invalid_grant", "error_description": "seen \"before\"\n"}).encode())
        else:
            self._answer(200, b'{"access_token":"' + b"a" * 600 + b'","token_type":"DPoP"}')


def _requests(n: int) -> list[tuple[bytes, dict[str, str]]]:
    # Bytes a Lua literal must escape: quotes, backslashes, %, a newline, a byte above 127.
    return [(f'grant_type=x&assertion=a{i}%2B"\\'.encode() + b"\n\xc3\xa9",
             {"content-type": "application/x-www-form-urlencoded", "dpop": f"proof-{i}"}) for i in range(n)]


def _fire(tmp_path: Path, requests: list[tuple[bytes, dict[str, str]]], refuse: set[bytes],
          concurrency: int) -> tuple[session_grant.Fired, _Recorder, float]:
    server = _Recorder(refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = session_grant.Fired()
        cpu = session_grant._fire_wrk(SimpleNamespace(root=tmp_path),  # type: ignore[arg-type]
                                      f"http://127.0.0.1:{server.server_address[1]}/t/oauth/token", requests,
                                      concurrency, out)
        return out, server, cpu
    finally:
        server.shutdown()
        server.server_close()


def test_every_request_is_sent_once_and_answered(tmp_path: Path) -> None:
    requests = _requests(40)
    out, server, cpu = _fire(tmp_path, requests, set(), concurrency=4)
    assert server.bodies == Counter(body for body, _ in requests)  # each exactly once, byte for byte
    assert server.dpops == Counter(h["dpop"] for _, h in requests)
    assert (out.count, out.errors, out.first_error) == (40, 0, "")
    assert out.seconds > 0 and cpu >= 0
    assert out.latency().n == 40


def test_refusals_are_counted_and_the_first_is_kept(tmp_path: Path) -> None:
    requests = _requests(12)
    refused = {requests[3][0], requests[7][0]}
    out, server, _ = _fire(tmp_path, requests, refused, concurrency=2)
    assert sum(server.bodies.values()) == 12 and set(server.bodies.values()) == {1}
    assert (out.count, out.errors) == (12, 2)
    assert out.first_error.startswith("400 ") and "invalid_grant" in out.first_error
