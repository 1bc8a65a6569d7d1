"""The browser join of PAP §5, Frontdoor's half: verify the assertion, then answer state.

A company's website receives the agent's browser assertion (a form POST to its
``web.browser_session_endpoint``) and hands it to Frontdoor, which holds what the checks
need: the agent directory (metadata and keys fetched SSRF-safely), the Sessions and a
replay cache shared by every replica. :func:`join_browser` checks, cheapest first:

1. the tenant offers browser sessions (its ``browser_session_endpoint`` setting), which is
   the ``aud`` the assertion must carry;
2. the agent named by ``iss`` resolves, and the assertion verifies with its keys (an
   unknown ``kid`` refetches them once): ``typ``, signature, lifetime of at most 60 s,
   ``return_to`` on one of the tenant's verified domains
   (:func:`frontdoor_protocol.browser_assertion.verify_browser_assertion`);
3. the ``jti`` is claimed once in Redis (fail closed when Redis is down);
4. the tenant's agent policy still accepts the agent, and the Session is live and belongs
   to that agent and User (PAP-5-08).

It then mints a **browser session token**: opaque to the company, stateless for
Frontdoor (an HMAC, under a key derived from the KEK, of the tenant, the Session ID and
the time). The company keeps it as the browser's cookie and asks :func:`browser_state`
with it on each page view; the answer is read from PostgreSQL each time, so the cookie
follows the Session (signed in, signed out, scopes) and is inactive as soon as the
Session ends or the agent is blocked (PAP-5-10, PAP-5-11). A token is also inactive after
:data:`BROWSER_SESSION_MAX_AGE` seconds, whatever the Session: the agent joins again.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Any, Final

import asyncpg
import msgspec
from frontdoor_identity import AgentDirectory, ClientResolutionError, get_agent_policy, is_allowed
from frontdoor_protocol.base64url import b64url_decode, b64url_encode
from frontdoor_protocol.browser_assertion import (
    DEFAULT_BROWSER_SKEW,
    BrowserAssertion,
    BrowserAssertionError,
    BrowserAssertionReason,
    browser_assertion_issuer,
    verify_browser_assertion,
)
from frontdoor_tenancy.domain_claims import listed_domains

from . import session_store
from .replay_cache import ReplayCache
from .session_store import SessionRecord
from .token_endpoint import TenantIssuer

__all__ = [
    "BROWSER_SESSION_MAX_AGE",
    "BrowserJoinRefused",
    "BrowserJoined",
    "BrowserTokens",
    "browser_state",
    "join_browser",
]

BROWSER_SESSION_MAX_AGE: Final = 24 * 3600
"""Most seconds a browser session token is honoured, even while its Session lives."""
INACTIVE: Final[dict[str, Any]] = {"active": False}

_PREFIX: Final = "fdbs_"
_MAX_TOKEN: Final = 1024
_MAC_BYTES: Final = 32


class _Payload(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    t: str  # tenant
    s: str  # Session ID
    i: int  # issued at
    n: str  # random: every join gets its own token


class BrowserTokens:
    """Mints and reads browser session tokens; the same ``secret`` on every replica."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 32:
            raise ValueError("the browser session secret needs at least 32 bytes")
        self._key = hashlib.sha256(b"frontdoor/browser-session/v1\x00" + secret).digest()

    def _mac(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest()

    def mint(self, tenant_id: str, session_id: str, *, now: int) -> str:
        """A token naming ``session_id`` of ``tenant_id``, issued at ``now``."""
        payload = _Payload(t=tenant_id, s=session_id, i=now, n=b64url_encode(secrets.token_bytes(12)))
        body = _PREFIX + b64url_encode(msgspec.json.encode(payload))
        return f"{body}.{b64url_encode(self._mac(body))}"

    def read(self, token: str, *, tenant_id: str, now: int) -> str | None:
        """The Session ID a token of this tenant names, or ``None`` (forged, foreign, too old)."""
        if not token.startswith(_PREFIX) or len(token) > _MAX_TOKEN or token.count(".") != 1:
            return None
        body, _, mac = token.partition(".")
        try:
            given = b64url_decode(mac)
            payload = msgspec.json.decode(b64url_decode(body[len(_PREFIX):]), type=_Payload)
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if len(given) != _MAC_BYTES or not hmac.compare_digest(given, self._mac(body)):
            return None
        if payload.t != tenant_id or not 0 <= now - payload.i <= BROWSER_SESSION_MAX_AGE:
            return None
        return payload.s


class BrowserJoinRefused(Exception):
    """The assertion does not join a browser; ``reason`` is safe to log and to tell the company.

    Reasons: ``not_offered`` (no ``browser_session_endpoint`` setting), ``unknown_client``
    (its metadata or keys could not be used), a
    :class:`~frontdoor_protocol.browser_assertion.BrowserAssertionReason`, ``replayed``,
    ``agent_not_allowed``, ``session_not_live`` (no such Session, ended, or another
    agent's or User's).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BrowserJoined(msgspec.Struct, frozen=True, kw_only=True):
    """A verified join: the token to keep as the cookie, where to go, the Session's state."""

    browser_session: str
    return_to: str
    state: dict[str, Any]


def _state(session: SessionRecord) -> dict[str, Any]:
    return {
        "active": True,
        "client_id": session.client_id,
        "sub": session.user_id,
        "sid": session.id,
        "signed_in": session.signed_in,
        "account": session.account_id if session.signed_in else None,
        "scope": session.scope if session.signed_in else None,
    }


async def _verified(directory: AgentDirectory, assertion: str, *, endpoint: str, domains: list[str],
                    now: int) -> BrowserAssertion:
    client_id = browser_assertion_issuer(assertion)
    if client_id is None:
        raise BrowserJoinRefused(BrowserAssertionReason.MALFORMED)
    try:
        client = await directory.get_client(client_id)
        keys = client.keys
        for attempt in range(2):
            try:
                return verify_browser_assertion(assertion, keys=keys, client_id=client_id, endpoint=endpoint,
                                                company_domains=domains, now=now)
            except BrowserAssertionError as exc:
                if exc.reason is not BrowserAssertionReason.UNKNOWN_KEY or attempt:
                    raise BrowserJoinRefused(exc.reason) from None
            fresh = await directory.refresh_keys(client_id)
            if fresh is None:
                break
            keys = fresh
    except ClientResolutionError:
        raise BrowserJoinRefused("unknown_client") from None
    raise BrowserJoinRefused(BrowserAssertionReason.UNKNOWN_KEY)


async def join_browser(pool: asyncpg.Pool, replay: ReplayCache, directory: AgentDirectory, tokens: BrowserTokens,
                       tenant: TenantIssuer, *, assertion: str, now: datetime) -> BrowserJoined:
    """Verify a browser assertion posted to the tenant's website; see the module docstring.

    Raises:
        BrowserJoinRefused: The browser must not join; nothing was recorded but the ``jti``.
        Unavailable: Redis could not check the ``jti`` (fail closed, 503).
    """
    endpoint = tenant.settings.browser_session_endpoint
    if endpoint is None:
        raise BrowserJoinRefused("not_offered")
    epoch = int(now.timestamp())
    async with pool.acquire() as conn:
        domains = await listed_domains(conn, tenant.tenant_id)
    verified = await _verified(directory, assertion, endpoint=endpoint, domains=domains, now=epoch)
    if not await replay.claim("browser-assertion", f"{tenant.tenant_id}\x00{verified.client_id}", verified.jti,
                              ttl_s=verified.exp - epoch + DEFAULT_BROWSER_SKEW):
        raise BrowserJoinRefused("replayed")
    async with pool.acquire() as conn:
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=verified.client_id)
        if not is_allowed(policy, verified.client_id):
            raise BrowserJoinRefused("agent_not_allowed")
        session = await session_store.find_session(conn, tenant.tenant_id, verified.session_id)
    if (session is None or not session.live or session.client_id != verified.client_id
            or session.user_id != verified.user_id):
        raise BrowserJoinRefused("session_not_live")
    return BrowserJoined(browser_session=tokens.mint(tenant.tenant_id, session.id, now=epoch),
                         return_to=verified.return_to, state=_state(session))


async def browser_state(conn: asyncpg.Connection, tokens: BrowserTokens, *, tenant_id: str, token: str,
                        now: datetime) -> dict[str, Any]:
    """The current state of the Session a browser joined, or ``{"active": false}``.

    Inactive for a token that is forged, another tenant's or too old, and once the
    Session has ended or its agent is no longer allowed.
    """
    session_id = tokens.read(token, tenant_id=tenant_id, now=int(now.timestamp()))
    if session_id is None:
        return INACTIVE
    session = await session_store.find_session(conn, tenant_id, session_id)
    if session is None or not session.live:
        return INACTIVE
    policy = await get_agent_policy(conn, tenant_id, client_id=session.client_id)
    if not is_allowed(policy, session.client_id):
        return INACTIVE
    return _state(session)
