"""Fetching untrusted URLs (agent metadata, JWKS, poppy.json, webhooks) without SSRF.

Every fetch gets a fresh client and connection pool: nothing (cookies, connections,
credentials) carries from one untrusted origin to another. `PooledFetcher` (from
`SafeFetcher.pooled`) is the exception for ``post`` at a high rate (the ledger's perform
webhooks): it keeps one small keep-alive pool per origin, never shared between origins,
still without cookies, redirects or content codings, every new connection checked. Redirects are followed
by hand so each hop is re-validated, and one deadline covers the whole fetch so a
server that trickles bytes cannot hold a worker (protocol §4.1).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from .address_rules import AddressRules
from .fetch_error import FetchError, FetchErrorCode
from .fetch_result import FetchResult
from .guarded_backend import GuardedNetworkBackend
from .guarded_transport import GuardedTransport, strict_ssl_context
from .media_type import media_type_matches
from .policy import OutboundPolicy
from .resolver import Resolver, SystemResolver
from .target_url import check_target

__all__ = ["PooledFetcher", "SafeFetcher"]

_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Set by the client or by `post` itself; a caller's header must not replace them.
_RESERVED_POST_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding",
                                    "cookie", "proxy-authorization"})


class _BorrowedTransport(httpx.AsyncBaseTransport):
    """Lends an injected transport to a per-fetch client without letting it close it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)


def _is_tls_failure(exc: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLError | ssl.CertificateError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _translate(exc: httpx.HTTPError) -> FetchError:
    if isinstance(exc, httpx.TimeoutException):
        return FetchError(FetchErrorCode.TIMEOUT, "timed out")
    if isinstance(exc, httpx.ConnectError):
        if _is_tls_failure(exc):
            return FetchError(FetchErrorCode.TLS_ERROR, f"TLS handshake failed ({exc})")
        return FetchError(FetchErrorCode.CONNECT_ERROR, f"connection failed ({exc})")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return FetchError(FetchErrorCode.BAD_URL, "unsupported URL")
    return FetchError(FetchErrorCode.HTTP_ERROR, f"{type(exc).__name__}: {exc}")


class SafeFetcher:
    """The one outbound HTTP client for URLs chosen by someone else.

    GET (and `post_json` and `post`, which never follow a redirect); HTTPS only (plus the development loopback exception); public
    addresses only, checked on the address actually connected to; bounded redirects,
    size and time; no cookies, credentials, proxies or content codings.
    """

    def __init__(
        self,
        policy: OutboundPolicy | None = None,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """Create a fetcher; cheap, holds no sockets.

        Args:
            policy: Limits and exceptions; the production defaults when None.
            resolver: Name resolution; the system resolver when None.
            ssl_context: A verifying TLS context (tests pass one trusting their CA).
            transport: Replaces the guarded network stack entirely (unit tests with
                `httpx.MockTransport`). URL, redirect, size and type rules still
                apply; connect-time address checks do not.

        Raises:
            ValueError: The policy's allowlist is malformed or ``ssl_context`` does
                not verify certificates.
        """
        self._policy = policy if policy is not None else OutboundPolicy()
        self._rules = AddressRules(self._policy)
        self._resolver: Resolver = resolver if resolver is not None else SystemResolver()
        self._ssl_context = strict_ssl_context(ssl_context) if transport is None else None
        self._transport = transport

    @property
    def policy(self) -> OutboundPolicy:
        """The policy this fetcher enforces."""
        return self._policy

    async def fetch(self, url: str, *, accept_json: bool = True) -> FetchResult:
        """GET ``url``, following at most ``max_redirects`` validated redirects.

        Args:
            url: The untrusted URL.
            accept_json: Require a JSON media type (``not_json`` otherwise) and send
                ``Accept: application/json``.

        Returns:
            The final 2xx response.

        Raises:
            FetchError: With one of the `FetchErrorCode` codes; nothing else escapes.
        """
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._policy.total_timeout):
                return await self._fetch(url, accept_json, started)
        except TimeoutError:
            raise FetchError(
                FetchErrorCode.TIMEOUT,
                f"fetch exceeded {self._policy.total_timeout:g} s",
            ) from None
        except httpx.HTTPError as exc:
            raise _translate(exc) from None

    async def post_json(self, url: str, body: bytes, *, content_type: str = "application/json") -> FetchResult:
        """POST ``body`` to ``url`` once and read a 2xx JSON answer.

        No redirect is followed: what is posted goes to ``url`` only, so a 3xx is
        ``bad_status`` like any other non-2xx. The same URL, address, size and time
        rules as `fetch` apply.

        Raises:
            FetchError: With one of the `FetchErrorCode` codes; nothing else escapes.
        """
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._policy.total_timeout):
                target = self._check(url, redirect=False)
                async with self._client(True) as client:
                    request = client.build_request("POST", target, content=body,
                                                   headers={"Content-Type": content_type})
                    response = await client.send(request, stream=True)
                    try:
                        data = await self._read(response, True)
                    finally:
                        await response.aclose()
                    return FetchResult(final_url=str(target), status=response.status_code,
                                       headers=self._headers(response), body=data, redirect_chain=(str(target),),
                                       elapsed=time.monotonic() - started)
        except TimeoutError:
            raise FetchError(FetchErrorCode.TIMEOUT, f"fetch exceeded {self._policy.total_timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise _translate(exc) from None

    async def post(
        self,
        url: str,
        body: bytes,
        *,
        headers: Mapping[str, str],
        timeout: float | None = None,  # noqa: ASYNC109 - applied with asyncio.timeout below
        max_bytes: int | None = None,
    ) -> FetchResult:
        """POST ``body`` to ``url`` once and return the answer whatever its status.

        For deliveries whose receiver's every answer matters (webhooks: ``410``,
        ``Retry-After``, a JSON body on 2xx). No redirect is followed and a 3xx is
        returned like any status. The URL and address rules of `fetch` apply. The body
        is cut, not refused, at ``max_bytes``, and dropped when it carries a content
        coding (nothing is decompressed): ``truncated`` says so.

        Args:
            url: The untrusted URL.
            body: The exact bytes to send.
            headers: Request headers (``Content-Type`` included); they may not set
                ``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Connection``,
                ``Accept-Encoding``, ``Cookie`` or ``Proxy-Authorization``.
            timeout: Deadline in seconds for the whole request (and for each read,
                write and pool wait within it); the policy's ``total_timeout`` when
                None. A connect is still bounded by the policy's ``connect_timeout``
                (or the deadline, when shorter).
            max_bytes: Most body bytes kept; the policy's ``max_bytes`` when None.

        Returns:
            The response, any status.

        Raises:
            ValueError: A reserved header was given.
            FetchError: With one of the `FetchErrorCode` codes (never ``bad_status``);
                nothing else escapes.
        """
        reserved = sorted(name for name in headers if name.lower() in _RESERVED_POST_HEADERS)
        if reserved:
            raise ValueError(f"headers {reserved} are set by the fetcher")
        deadline = self._policy.total_timeout if timeout is None else timeout
        limit = self._policy.max_bytes if max_bytes is None else max_bytes
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline):
                target = self._check(url, redirect=False)
                return await self._post_to(target, body, headers, deadline=deadline, limit=limit, started=started)
        except TimeoutError:
            raise FetchError(FetchErrorCode.TIMEOUT, f"request exceeded {deadline:g} s") from None
        except httpx.HTTPError as exc:
            raise _translate(exc) from None

    async def get(self, url: str, *, headers: Mapping[str, str], max_bytes: int | None = None) -> FetchResult:
        """GET ``url`` once with ``headers`` and return the answer whatever its status.

        For a resource request whose refusal matters as much as its success (the agent
        simulator's call to a company API: a ``401`` and its ``WWW-Authenticate``). As
        `post`: no redirect is followed (a 3xx is returned), the URL and address rules of
        `fetch` apply, the body is cut at ``max_bytes`` (the policy's when None).

        Raises:
            ValueError: A reserved header was given.
            FetchError: With one of the `FetchErrorCode` codes (never ``bad_status``).
        """
        reserved = sorted(name for name in headers if name.lower() in _RESERVED_POST_HEADERS)
        if reserved:
            raise ValueError(f"headers {reserved} are set by the fetcher")
        deadline = self._policy.total_timeout
        limit = self._policy.max_bytes if max_bytes is None else max_bytes
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline):
                target = self._check(url, redirect=False)
                async with self._client(False, timeout=deadline) as client:
                    response = await client.send(client.build_request("GET", target, headers=dict(headers)),
                                                 stream=True)
                    try:
                        raw_size = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
                        if raw_size > self._policy.max_header_bytes:
                            raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
                        data, truncated = await self._read_prefix(response, limit)
                    finally:
                        await response.aclose()
                    return FetchResult(final_url=str(target), status=response.status_code,
                                       headers=self._headers(response), body=data, redirect_chain=(str(target),),
                                       elapsed=time.monotonic() - started, truncated=truncated)
        except TimeoutError:
            raise FetchError(FetchErrorCode.TIMEOUT, f"request exceeded {deadline:g} s") from None
        except httpx.HTTPError as exc:
            raise _translate(exc) from None

    async def _post_to(self, target: httpx.URL, body: bytes, headers: Mapping[str, str], *, deadline: float,
                       limit: int, started: float) -> FetchResult:
        async with self._client(False, timeout=deadline) as client:
            return await self._send_post(client, target, body, headers, limit=limit, started=started)

    async def _send_post(self, client: httpx.AsyncClient, target: httpx.URL, body: bytes, headers: Mapping[str, str],
                         *, limit: int, started: float, limits: httpx.Timeout | None = None) -> FetchResult:
        # ``limits``: per-request timeouts, for a kept client built without the caller's deadline.
        if limits is None:
            request = client.build_request("POST", target, content=body, headers=dict(headers))
        else:
            request = client.build_request("POST", target, content=body, headers=dict(headers), timeout=limits)
        response = await client.send(request, stream=True)
        try:
            raw_size = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
            if raw_size > self._policy.max_header_bytes:
                raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
            data, truncated = await self._read_prefix(response, limit)
        finally:
            await response.aclose()
        return FetchResult(final_url=str(target), status=response.status_code,
                           headers=self._headers(response), body=data, redirect_chain=(str(target),),
                           elapsed=time.monotonic() - started, truncated=truncated)

    def pooled(self, *, max_origins: int = 256, max_connections: int = 32, keepalive_expiry: float = 4.0
               ) -> PooledFetcher:
        """This fetcher's rules, with `post` over kept-alive connections per origin (see `PooledFetcher`)."""
        return PooledFetcher(self, max_origins=max_origins, max_connections=max_connections,
                             keepalive_expiry=keepalive_expiry)

    @staticmethod
    async def _read_prefix(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
        # A content coding we did not ask for is not decoded (nothing may expand past the
        # cap between two checks): such a body is dropped, as if cut at zero bytes.
        codings = response.headers.get_list("content-encoding")
        if any(c.strip().lower() not in ("", "identity") for c in codings):
            return b"", True
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                return bytes(body[:limit]), True
        return bytes(body), False

    def _client(self, accept_json: bool, *, timeout: float | None = None,
                pool: tuple[int, float] | None = None) -> httpx.AsyncClient:
        # ``timeout`` (a caller's deadline, `post`) replaces the policy's total for the
        # client's own read/write/pool limits, or they would cut the request short first.
        # ``pool``: (connections, keep-alive seconds) for a kept client (`PooledFetcher`).
        policy = self._policy
        total = policy.total_timeout if timeout is None else timeout
        transport: httpx.AsyncBaseTransport
        if self._transport is not None:
            transport = _BorrowedTransport(self._transport)
        else:
            assert self._ssl_context is not None  # set whenever no transport is given
            backend = GuardedNetworkBackend(self._rules, self._resolver)
            if pool is None:
                transport = GuardedTransport(backend, self._ssl_context)
            else:
                transport = GuardedTransport(backend, self._ssl_context, max_connections=pool[0],
                                             max_keepalive_connections=pool[0], keepalive_expiry=pool[1])
        return httpx.AsyncClient(
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
            timeout=httpx.Timeout(total, connect=min(policy.connect_timeout, total)),
            headers={
                "User-Agent": policy.user_agent,
                "Accept": "application/json" if accept_json else "*/*",
                "Accept-Encoding": "identity",
            },
        )

    def _check(self, url: str | httpx.URL, *, redirect: bool) -> httpx.URL:
        return check_target(
            url,
            self._rules,
            allow_http_loopback=self._policy.allow_http_loopback,
            redirect=redirect,
        )

    async def _fetch(self, url: str, accept_json: bool, started: float) -> FetchResult:
        target = self._check(url, redirect=False)
        chain = [str(target)]
        async with self._client(accept_json) as client:
            while True:
                response = await client.send(client.build_request("GET", target), stream=True)
                try:
                    if response.status_code not in _REDIRECT_STATUSES:
                        body = await self._read(response, accept_json)
                        return FetchResult(
                            final_url=str(target),
                            status=response.status_code,
                            headers=self._headers(response),
                            body=body,
                            redirect_chain=tuple(chain),
                            elapsed=time.monotonic() - started,
                        )
                    target = self._next_hop(response, target, len(chain) - 1)
                    chain.append(str(target))
                finally:
                    await response.aclose()

    def _next_hop(self, response: httpx.Response, target: httpx.URL, followed: int) -> httpx.URL:
        locations = response.headers.get_list("location")
        if len(locations) != 1:
            raise FetchError(
                FetchErrorCode.BAD_STATUS,
                "redirect without exactly one Location",
                status=response.status_code,
            )
        if followed >= self._policy.max_redirects:
            raise FetchError(
                FetchErrorCode.TOO_MANY_REDIRECTS,
                f"more than {self._policy.max_redirects} redirects",
            )
        try:
            joined = target.join(locations[0])
        except httpx.InvalidURL:
            raise FetchError(FetchErrorCode.BAD_URL, "unparsable Location") from None
        return self._check(joined, redirect=True)

    def _headers(self, response: httpx.Response) -> dict[str, str]:
        combined: dict[str, str] = {}
        for name, value in response.headers.multi_items():
            combined[name] = f"{combined[name]}, {value}" if name in combined else value
        return combined

    async def _read(self, response: httpx.Response, accept_json: bool) -> bytes:
        policy = self._policy
        raw_size = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
        if raw_size > policy.max_header_bytes:
            raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
        if not 200 <= response.status_code < 300:
            raise FetchError(
                FetchErrorCode.BAD_STATUS,
                f"status {response.status_code}",
                status=response.status_code,
            )
        codings = response.headers.get_list("content-encoding")
        if any(c.strip().lower() not in ("", "identity") for c in codings):
            raise FetchError(FetchErrorCode.HTTP_ERROR, "content coding not accepted")
        if accept_json:
            types = response.headers.get_list("content-type")
            if len(types) != 1 or not media_type_matches(types[0], policy.accepted_content_types):
                raise FetchError(FetchErrorCode.NOT_JSON, "response is not JSON")
        for length in response.headers.get_list("content-length"):
            if length.strip().isdigit() and int(length) > policy.max_bytes:
                raise FetchError(FetchErrorCode.TOO_LARGE, f"Content-Length over {policy.max_bytes}")
        body = bytearray()
        # Content codings were refused above, so decoded bytes are the wire bytes:
        # no decompression bomb can expand past the cap between two checks.
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > policy.max_bytes:
                raise FetchError(FetchErrorCode.TOO_LARGE, f"body over {policy.max_bytes} bytes")
        return bytes(body)


@dataclass
class _Kept:
    client: httpx.AsyncClient
    in_flight: int = 0
    evicted: bool = False


class PooledFetcher(SafeFetcher):
    """A `SafeFetcher` whose ``post`` reuses connections: one small pool per origin.

    For POSTs to the same few receivers at a high rate (a company's perform webhook): no
    TCP/TLS handshake and no client set-up per request. Every rule of `SafeFetcher.post`
    holds (URL check, no redirects, no cookies, size, header and time caps); a connection
    is checked by the guarded backend when it is opened and only ever carries requests to
    its own origin. Idle connections close after ``keepalive_expiry`` seconds, below the
    usual server idle timeouts (Node's is 5 s); at most ``max_origins`` pools are kept
    (the least recently used is closed once idle). GET fetches are not pooled.
    """

    def __init__(self, base: SafeFetcher, *, max_origins: int, max_connections: int, keepalive_expiry: float) -> None:
        """Share ``base``'s policy, resolver, TLS context and transport (see `SafeFetcher.pooled`)."""
        self._policy = base._policy
        self._rules = base._rules
        self._resolver = base._resolver
        self._ssl_context = base._ssl_context
        self._transport = base._transport
        self._max_origins = max(max_origins, 1)
        self._pool_limits = (max(max_connections, 1), keepalive_expiry)
        self._kept: OrderedDict[tuple[str, str, int | None], _Kept] = OrderedDict()

    async def _post_to(self, target: httpx.URL, body: bytes, headers: Mapping[str, str], *, deadline: float,
                       limit: int, started: float) -> FetchResult:
        origin = (target.scheme, target.host, target.port)
        kept = self._kept.get(origin)
        if kept is None:
            kept = self._kept[origin] = _Kept(self._client(False, pool=self._pool_limits))
            await self._evict()
        self._kept.move_to_end(origin)
        kept.in_flight += 1
        limits = httpx.Timeout(deadline, connect=min(self._policy.connect_timeout, deadline))
        try:
            return await self._send_post(kept.client, target, body, headers, limit=limit, started=started,
                                         limits=limits)
        finally:
            kept.in_flight -= 1
            if kept.evicted and kept.in_flight == 0:
                await kept.client.aclose()

    async def _evict(self) -> None:
        while len(self._kept) > self._max_origins:
            _, old = self._kept.popitem(last=False)
            old.evicted = True
            if old.in_flight == 0:
                await old.client.aclose()

    async def aclose(self) -> None:
        """Close every kept connection (requests still running finish on theirs first)."""
        kept, self._kept = list(self._kept.values()), OrderedDict()
        for k in kept:
            k.evicted = True
            if k.in_flight == 0:
                await k.client.aclose()
