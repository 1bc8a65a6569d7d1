"""Northwind's relay endpoint for Mediated Sign-In (PAP §4.7, docs/sign-in.md).

Frontdoor POSTs ``application/jwt`` to ``/poppy/mediated-relay``: a relay request signed
with the issuer's key, carrying the email and password an agent collected. The endpoint
verifies it with the sdk (issuer, audience = Northwind's origin, 60 s, one-use ``jti``),
checks the credentials against the demo accounts (the password compared in constant
time even for an unknown email, one answer for both), limits attempts per email, and
answers ``complete`` or ``failed``. The values are never logged, stored or echoed.
"""

from __future__ import annotations

import hmac
import time
from collections import deque
from typing import Any, Final

from frontdoor_sdk import (
    Clock,
    InMemoryReplayCache,
    IssuerKeySource,
    JwksUnavailable,
    RelayRefused,
    relay_complete,
    relay_failed,
    verify_relay_request,
)
from litestar import MediaType, Request, Response, Router, post

from northwind import catalog
from northwind.config import NorthwindConfig

__all__ = ["RELAY_PATH", "AttemptLimiter", "mediated_router"]

RELAY_PATH: Final = "/poppy/mediated-relay"
_MAX_BODY: Final = 16 * 1024
_MAX_FIELD: Final = 1024
_NO_STORE: Final = {"Cache-Control": "no-store"}


class AttemptLimiter:
    """At most ``limit`` attempts per key in ``window`` seconds, in this process's memory.

    Keys are case-folded emails; past ``max_keys`` the oldest keys are forgotten.
    """

    def __init__(self, limit: int = 5, window: float = 60.0, *, max_keys: int = 10_000) -> None:
        self._limit, self._window, self._max_keys = limit, window, max_keys
        self._seen: dict[str, deque[float]] = {}

    def allow(self, key: str, now: float | None = None) -> bool:
        """Record an attempt for ``key``; ``False`` once the window holds ``limit`` of them."""
        at = time.monotonic() if now is None else now
        times = self._seen.pop(key, None) or deque()
        while times and times[0] <= at - self._window:
            times.popleft()
        allowed = len(times) < self._limit
        if allowed:
            times.append(at)
        self._seen[key] = times  # re-inserted: the dict's order is least recently used first
        while len(self._seen) > self._max_keys:
            del self._seen[next(iter(self._seen))]
        return allowed


def _account(email: str, password: str, demo_password: str) -> catalog.DemoAccount | None:
    """The account for these credentials; the password is compared even for an unknown email."""
    if len(email) > _MAX_FIELD or len(password) > _MAX_FIELD:
        return None
    account = catalog.demo_account(email)
    matches = hmac.compare_digest(password.encode(), demo_password.encode())
    return account if account is not None and matches else None


def _json(body: dict[str, str], status: int = 200) -> Response[dict[str, str]]:
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=_NO_STORE)


def mediated_router(config: NorthwindConfig, issuer_keys: IssuerKeySource, clock: Clock,
                    *, limiter: AttemptLimiter | None = None) -> Router:
    """``POST /poppy/mediated-relay``: the tenant's ``mediated.relay_url``.

    Args:
        config: Northwind's configuration: issuer, origin, demo password.
        issuer_keys: The issuer's JWKS cache (:func:`frontdoor_sdk.issuer_key_source`).
        clock: The time source.
        limiter: Attempts per email; five a minute if omitted.
    """
    replays = InMemoryReplayCache(clock=clock)
    attempts = limiter or AttemptLimiter()

    @post(RELAY_PATH, status_code=200, request_max_body_size=_MAX_BODY)
    async def relay(request: Request[Any, Any, Any]) -> Response[dict[str, str]]:
        """Verify Frontdoor's relay request, then check the email and password."""
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/jwt":
            return _json({"error": "invalid_request"}, 400)
        raw = await request.body()
        try:
            checked = await verify_relay_request(raw.decode("ascii"), issuer=config.issuer, issuer_keys=issuer_keys,
                                                 relay_origin=config.origin, now=clock(), replay_cache=replays)
        except (RelayRefused, UnicodeDecodeError):
            return _json({"error": "invalid_request"}, 400)
        except JwksUnavailable:
            return _json({"error": "temporarily_unavailable"}, 503)
        if checked.is_code:
            return _json(relay_failed())  # Northwind never asks for a one-time code
        email, password = checked.fields.get("email", ""), checked.fields.get("password", "")
        if not attempts.allow(email.strip().casefold()[:_MAX_FIELD]):
            return _json(relay_failed())
        account = _account(email, password, config.demo_password)
        return _json(relay_complete(account.account_id) if account is not None else relay_failed())

    return Router("/", route_handlers=[relay], include_in_schema=False)
