"""The httpx transport for untrusted fetches: httpx's own, on a guarded connection pool."""

from __future__ import annotations

import ssl

import httpcore
import httpx

from .guarded_backend import GuardedNetworkBackend

__all__ = ["GuardedTransport", "strict_ssl_context"]


def strict_ssl_context(context: ssl.SSLContext | None = None) -> ssl.SSLContext:
    """Return a verifying TLS client context, refusing one that skips verification.

    Args:
        context: A caller's context (tests pass one trusting a local CA), or None
            for the certifi bundle.

    Returns:
        The context, with TLS 1.2 as the floor when it was created here.

    Raises:
        ValueError: ``context`` does not require a certificate or does not check
            the host name.
    """
    if context is None:
        context = httpx.create_ssl_context(trust_env=False)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    if context.verify_mode != ssl.CERT_REQUIRED or not context.check_hostname:
        raise ValueError("outbound TLS context must verify certificates and host names")
    return context


class GuardedTransport(httpx.AsyncHTTPTransport):
    """`httpx.AsyncHTTPTransport` whose pool dials through a `GuardedNetworkBackend`.

    httpx 0.28 builds its `httpcore.AsyncConnectionPool` internally with no way to
    pass a network backend, so the pool is rebuilt here with the same request
    mapping and exception translation kept from httpx. The swap relies on the
    private ``_pool`` attribute; a unit test pins it so an httpx upgrade that moves
    it fails loudly instead of silently falling back to unguarded sockets.
    """

    def __init__(self, backend: GuardedNetworkBackend, ssl_context: ssl.SSLContext, *, max_connections: int = 4,
                 max_keepalive_connections: int = 2, keepalive_expiry: float = 5.0) -> None:
        """Create the transport.

        Args:
            backend: The guarded backend every connection goes through.
            ssl_context: A verifying TLS client context.
            max_connections: Connections open at once (a per-fetch client needs few).
            max_keepalive_connections: Idle connections kept for reuse.
            keepalive_expiry: Seconds an idle connection is kept.
        """
        super().__init__(verify=ssl_context, trust_env=False, http1=True, http2=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )

    @property
    def network_backend(self) -> GuardedNetworkBackend:
        """The backend the pool dials through (read from the pool, for the pin test)."""
        backend = self._pool._network_backend
        if not isinstance(backend, GuardedNetworkBackend):
            raise TypeError("connection pool is not using the guarded backend")
        return backend
