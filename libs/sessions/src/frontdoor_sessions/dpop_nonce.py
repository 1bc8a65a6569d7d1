"""Stateless DPoP server nonces (RFC 9449 §8), per tenant, rotating every 5 minutes.

A nonce is an HMAC of the tenant and the time bucket under a key derived from the KEK,
so every replica issues and accepts the same values without shared state. The current
and the previous bucket are accepted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["NonceSource"]

_BUCKET_S = 300


class NonceSource:
    """Issues and recognises nonces for each tenant."""

    def __init__(self, secret: bytes) -> None:
        self._key = hashlib.sha256(b"frontdoor/dpop-nonce/v1\x00" + secret).digest()

    def _nonce(self, tenant_id: str, bucket: int) -> str:
        mac = hmac.new(self._key, f"{tenant_id}\x00{bucket}".encode(), hashlib.sha256).digest()[:18]
        return base64.urlsafe_b64encode(mac).decode().rstrip("=")

    def current(self, tenant_id: str, now: int) -> str:
        """The nonce to send in ``DPoP-Nonce``."""
        return self._nonce(tenant_id, now // _BUCKET_S)

    def accepted(self, tenant_id: str, now: int) -> tuple[str, str]:
        """Nonces a proof may carry now (current and previous bucket)."""
        b = now // _BUCKET_S
        return self._nonce(tenant_id, b), self._nonce(tenant_id, b - 1)
