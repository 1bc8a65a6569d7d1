"""The transport really dials through the guarded backend; TLS contexts must verify."""

from __future__ import annotations

import ssl

import httpcore
import pytest
from frontdoor_core.outbound import (
    AddressRules,
    GuardedNetworkBackend,
    GuardedTransport,
    OutboundPolicy,
    SystemResolver,
    strict_ssl_context,
)


def test_pool_uses_the_guarded_backend() -> None:
    # Pins httpx's private `_pool` swap: if an httpx upgrade renames it, this fails
    # instead of the transport silently dialling unguarded sockets.
    backend = GuardedNetworkBackend(AddressRules(OutboundPolicy()), SystemResolver())
    transport = GuardedTransport(backend, strict_ssl_context())

    assert isinstance(transport._pool, httpcore.AsyncConnectionPool)
    assert transport._pool._network_backend is backend
    assert transport.network_backend is backend


def test_default_context_verifies_with_a_tls12_floor() -> None:
    context = strict_ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_contexts_that_skip_verification_are_refused() -> None:
    no_hostname = ssl.create_default_context()
    no_hostname.check_hostname = False
    unverified = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE

    for context in (no_hostname, unverified):
        with pytest.raises(ValueError):
            strict_ssl_context(context)
