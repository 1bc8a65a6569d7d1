"""A real authoritative DNS server on 127.0.0.1 whose TXT records tests change at run time.

Built on ``dnslib.server.DNSServer``; listens on UDP and TCP on the same
OS-chosen port, so it can be handed to the resolver like any nameserver
(``FRONTDOOR_DNS_NAMESERVERS=127.0.0.1:<port>``)::

    with LocalDNS() as dns:
        dns.set_txt("_frontdoor-challenge.example.com", ["frontdoor-verify=abc"])
        resolver = TxtResolver(dns.nameservers)

Behaviour, per name (case-insensitive, trailing dot optional):

* a name with TXT records answers them (each record is one string or a list of
  character-strings);
* a name set with an empty list, or an ancestor of a name with records (an
  empty non-terminal), exists: NOERROR with no answer;
* anything else is NXDOMAIN;
* ``fail(name, "servfail" | "refused" | "timeout")`` overrides that: SERVFAIL,
  REFUSED, or no answer at all (over TCP the connection is held open until the
  server stops, so clients time out rather than see EOF).

UDP answers longer than ``udp_max_size`` (512 by default, RFC 1035 §4.2.1)
are truncated, so large record sets exercise the client's TCP retry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from dnslib import QTYPE, RCODE, RR, TXT, DNSError, DNSRecord
from dnslib.server import DNSHandler, DNSServer

FailureMode = Literal["servfail", "refused", "timeout"]
TxtRecord = str | bytes | Sequence[str | bytes]

_TTL = 0
_MAX_STRING = 255


@dataclass(frozen=True)
class Query:
    """One query the server received."""

    name: str
    qtype: str
    transport: Literal["udp", "tcp"]


class _Drop(DNSError):  # type: ignore[misc]  # dnslib is untyped
    """Raised by the resolver to send nothing; DNSHandler swallows DNSError."""


class _QuietLogger:
    def __getattr__(self, _name: str) -> Any:
        return lambda *_args: None


class _Zone:
    """Records and failure modes, guarded by one lock (handlers run in threads)."""

    def __init__(self, stopping: threading.Event, udp_max_size: int) -> None:
        self._udp_max_size = udp_max_size
        self._lock = threading.Lock()
        self._txt: dict[str, list[list[bytes]]] = {}
        self._failures: dict[str, FailureMode] = {}
        self._queries: list[Query] = []
        self._stopping = stopping

    # dnslib calls resolve(request, handler) from its handler threads.
    def resolve(self, request: DNSRecord, handler: DNSHandler) -> DNSRecord:
        qname = str(request.q.qname)
        key = _key(qname)
        qtype = QTYPE[request.q.qtype]
        with self._lock:
            self._queries.append(Query(key, qtype, handler.protocol))
            failure = self._failures.get(key)
            records = [list(strings) for strings in self._txt.get(key, [])]
            exists = key in self._txt or any(name.endswith("." + key) for name in self._txt)
        if failure == "timeout":
            if handler.protocol == "tcp":
                self._stopping.wait(30)
            raise _Drop("dropped on purpose")
        reply = request.reply()
        if failure == "servfail":
            reply.header.rcode = RCODE.SERVFAIL
        elif failure == "refused":
            reply.header.rcode = RCODE.REFUSED
        elif not exists:
            reply.header.rcode = RCODE.NXDOMAIN
        elif request.q.qtype in (QTYPE.TXT, QTYPE.ANY):
            for strings in records:
                reply.add_answer(RR(qname, QTYPE.TXT, rdata=TXT(strings), ttl=_TTL))
        if handler.protocol == "udp" and len(reply.pack()) > self._udp_max_size:
            # Truncate here rather than with DNSHandler.udplen: dnslib's own
            # truncation drops the question section, which resolvers (rightly)
            # refuse to match to their query.
            reply = request.reply()
            reply.header.tc = 1
        return reply

    def set_txt(self, name: str, records: Iterable[TxtRecord]) -> None:
        encoded = [_encode_record(record) for record in records]
        with self._lock:
            self._txt[_key(name)] = encoded

    def add_txt(self, name: str, record: TxtRecord) -> None:
        encoded = _encode_record(record)
        with self._lock:
            self._txt.setdefault(_key(name), []).append(encoded)

    def remove(self, name: str) -> None:
        with self._lock:
            self._txt.pop(_key(name), None)

    def fail(self, name: str, mode: FailureMode | None) -> None:
        with self._lock:
            if mode is None:
                self._failures.pop(_key(name), None)
            else:
                self._failures[_key(name)] = mode

    def clear(self) -> None:
        with self._lock:
            self._txt.clear()
            self._failures.clear()
            self._queries.clear()

    def queries(self) -> list[Query]:
        with self._lock:
            return list(self._queries)


class LocalDNS:
    """A local authoritative DNS server for tests, as a context manager.

    Args:
        host: The loopback address to listen on.
        udp_max_size: Largest UDP answer before truncation (TC bit).
    """

    def __init__(self, host: str = "127.0.0.1", *, udp_max_size: int = 512) -> None:
        self.host = host
        self._stopping = threading.Event()
        self._zone = _Zone(self._stopping, udp_max_size)
        self._servers: list[DNSServer] = []
        self._threads: list[threading.Thread] = []
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The port, shared by UDP and TCP."""
        if self._port is None:
            raise RuntimeError("LocalDNS is not running")
        return self._port

    @property
    def nameservers(self) -> list[tuple[str, int]]:
        """``[(host, port)]``, as ``TxtResolver`` takes it."""
        return [(self.host, self.port)]

    def set_txt(self, name: str, records: Iterable[TxtRecord]) -> None:
        """Replace the TXT records at ``name``; an empty list leaves the name existing without TXT."""
        self._zone.set_txt(name, records)

    def add_txt(self, name: str, record: TxtRecord) -> None:
        """Add one TXT record at ``name``."""
        self._zone.add_txt(name, record)

    def remove(self, name: str) -> None:
        """Delete ``name`` and its records (it answers NXDOMAIN unless it has descendants)."""
        self._zone.remove(name)

    def fail(self, name: str, mode: FailureMode | None) -> None:
        """Make every query for ``name`` fail in ``mode``; ``None`` restores normal answers."""
        self._zone.fail(name, mode)

    def clear(self) -> None:
        """Forget every record, failure mode and logged query."""
        self._zone.clear()

    @property
    def queries(self) -> list[Query]:
        """A snapshot of the queries received so far."""
        return self._zone.queries()

    def start(self) -> None:
        """Bind UDP and TCP on one free port and serve in background threads."""
        self._stopping.clear()
        logger = _QuietLogger()
        for _attempt in range(50):
            udp = DNSServer(self._zone, address=self.host, port=0, logger=logger)
            port = udp.server.server_address[1]
            try:
                tcp = DNSServer(self._zone, address=self.host, port=port, tcp=True, logger=logger)
            except OSError:
                udp.server.server_close()
                continue
            break
        else:
            raise RuntimeError("no port free for both UDP and TCP")
        self._servers = [udp, tcp]
        self._port = port
        for server in self._servers:
            thread = threading.Thread(
                target=server.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True, name="local-dns"
            )
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop serving and close both sockets."""
        self._stopping.set()
        for server in self._servers:
            server.server.shutdown()
            server.server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers, self._threads, self._port = [], [], None

    def __enter__(self) -> LocalDNS:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def _key(name: str) -> str:
    return name.rstrip(".").lower()


def _encode_record(record: TxtRecord) -> list[bytes]:
    strings = [record] if isinstance(record, str | bytes) else list(record)
    encoded = [value.encode("utf-8") if isinstance(value, str) else bytes(value) for value in strings]
    if not encoded or any(len(value) > _MAX_STRING for value in encoded):
        raise ValueError(f"a TXT record is 1+ character-strings of at most {_MAX_STRING} bytes")
    return encoded


__all__ = ["FailureMode", "LocalDNS", "Query"]
