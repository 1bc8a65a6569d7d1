"""Server-provided DPoP nonces at a resource (RFC 9449 §9; PAP-4.3-21), optional.

With nonces, a proof is judged by a value the company issued rather than by the agent's
clock alone: a proof without a current nonce gets ``use_dpop_nonce`` with a fresh one in
``DPoP-Nonce``, and the agent retries once with it (PAP-4.3-08).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Collection
from typing import Final, Protocol

from frontdoor_protocol import b64url_encode

from frontdoor_sdk.clock import Clock, epoch_seconds, utc_now

__all__ = ["DPoPNonces", "RotatingDPoPNonces"]

_MIN_SECRET_BYTES: Final = 32


class DPoPNonces(Protocol):
    """The nonces a resource issues and accepts."""

    def current(self) -> str:
        """The nonce to send in ``DPoP-Nonce`` now."""
        ...

    def accepted(self) -> Collection[str]:
        """Every nonce a proof may carry now (the current one and, during rotation, the last)."""
        ...


class RotatingDPoPNonces:
    """Stateless nonces: an HMAC of the current time window, so replicas sharing the secret agree.

    A nonce is accepted during its window and the next one, so between ``period`` and
    ``2 * period`` seconds.

    Args:
        secret: At least 32 random bytes, the same on every replica.
        period: Seconds per window.
        clock: The time source.
    """

    def __init__(self, secret: bytes, *, period: int = 300, clock: Clock | None = None) -> None:
        if len(secret) < _MIN_SECRET_BYTES or period < 1:
            raise ValueError("secret must be at least 32 bytes and period at least 1 second")
        self._secret = secret
        self._period = period
        self._clock = clock or utc_now

    def __repr__(self) -> str:
        return f"RotatingDPoPNonces(period={self._period})"  # Never the secret.

    def _window(self) -> int:
        return math.floor(epoch_seconds(self._clock) / self._period)

    def _nonce(self, window: int) -> str:
        digest = hmac.new(self._secret, f"frontdoor-dpop-nonce:{window}".encode(), hashlib.sha256).digest()
        return b64url_encode(digest[:24])

    def current(self) -> str:
        """See :meth:`DPoPNonces.current`."""
        return self._nonce(self._window())

    def accepted(self) -> Collection[str]:
        """See :meth:`DPoPNonces.accepted`."""
        window = self._window()
        return (self._nonce(window), self._nonce(window - 1))
