"""What a test puts on a real stack's ``PYTHONPATH`` in place of DNS and the web PKI (`tests.support.tls_front`).

Frontdoor's own fetches (agent metadata and JWKS, the login's JWKS, publish checks) and its
webhook deliveries resolve host names once, in ``frontdoor_core.outbound.SystemResolver``, and
verify TLS against certifi's bundle. A test stack's agents and companies live on loopback at
names like ``atlas.example``: with ``STACK_SITE_HOSTS`` (``name=ip,...``) set, those names
resolve to their loopback addresses here, as an ``/etc/hosts`` entry would make them; with
``STACK_SITE_CA_BUNDLE`` set, certifi's bundle is that file (certifi's roots plus the test's
throwaway CA), as a private deployment's trust store would be. Every check on the answer
(the outbound allowlist, TLS host names) still runs. Inert when neither is set.

Any other client in those processes that dials through anyio (httpx, e.g. the example
company's sdk calling the issuer under ``make run``; granian's uvloop resolves without
``socket.getaddrinfo``) reaches the same names: ``anyio.connect_tcp`` dials their address,
TLS still naming the host. So does the sdk's lean client for the verifier's per-request
calls (``frontdoor_sdk._lean_http``: ``loop.create_connection``, which uvloop resolves itself).
"""

from __future__ import annotations

import os

_HOSTS = {
    name.strip().lower(): ip.strip()
    for name, _, ip in (item.partition("=") for item in os.environ.get("STACK_SITE_HOSTS", "").split(","))
    if name.strip() and ip.strip()
}
_BUNDLE = os.environ.get("STACK_SITE_CA_BUNDLE", "")

if _BUNDLE:
    import certifi

    certifi.where = lambda: _BUNDLE

if _HOSTS:
    from frontdoor_core.outbound import resolver as _resolver

    _system_resolve = _resolver.SystemResolver.resolve

    async def _resolve(self: _resolver.SystemResolver, host: str, port: int) -> list[str]:
        ip = _HOSTS.get(host.lower().rstrip("."))
        return [ip] if ip is not None else await _system_resolve(self, host, port)

    _resolver.SystemResolver.resolve = _resolve  # type: ignore[method-assign]

    import anyio as _anyio

    _connect_tcp = _anyio.connect_tcp

    async def _connect(remote_host: object, remote_port: int, **kwargs: object) -> object:
        name = remote_host.lower().rstrip(".") if isinstance(remote_host, str) else ""
        ip = _HOSTS.get(name)
        if ip is not None and kwargs.get("tls") and not kwargs.get("tls_hostname"):
            kwargs["tls_hostname"] = name
        return await _connect_tcp(ip or remote_host, remote_port, **kwargs)  # type: ignore[arg-type]

    _anyio.connect_tcp = _connect  # type: ignore[assignment]

    import asyncio as _asyncio

    from frontdoor_sdk import _lean_http

    class _DialingLoop:
        """The running loop, its ``create_connection`` dialling a name's address (SNI: the name)."""

        def __init__(self, loop: _asyncio.AbstractEventLoop) -> None:
            self._loop = loop

        def __getattr__(self, name: str) -> object:
            return getattr(self._loop, name)

        async def create_connection(
            self, factory: object, host: object = None, port: object = None, **kwargs: object
        ) -> object:
            ip = _HOSTS.get(host.lower().rstrip(".")) if isinstance(host, str) else None
            if ip is not None and kwargs.get("ssl") and not kwargs.get("server_hostname"):
                kwargs["server_hostname"] = host
            return await self._loop.create_connection(factory, ip or host, port, **kwargs)  # type: ignore[call-overload]

    class _LeanAsyncio:
        """``asyncio`` as the lean client sees it: everything as is but `get_running_loop`."""

        def __getattr__(self, name: str) -> object:
            return getattr(_asyncio, name)

        _proxies: dict[int, _DialingLoop] = {}

        def get_running_loop(self) -> _DialingLoop:
            loop = _asyncio.get_running_loop()
            proxy = self._proxies.get(id(loop))
            if proxy is None or proxy._loop is not loop:  # one per loop: the client compares them
                proxy = self._proxies[id(loop)] = _DialingLoop(loop)
            return proxy

    _lean_http.asyncio = _LeanAsyncio()  # type: ignore[assignment]
