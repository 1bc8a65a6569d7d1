"""Your website's side of the PAP 1.0 browser join: the callback Frontdoor's hosted join ends at.

In 1.0 Frontdoor hosts the join itself (ADR 0004 §8): your ``poppy.json`` advertises
``{issuer}/join``, the agent's browser gets a code there, the agent authorizes it with its
Session, and the browser is sent to your join callback (the issuer setting
``protocol.join_callback_url``) with a form POST of ``assertion=<JWT>``: a join
assertion, signed by your issuer, valid 60 s, usable once.

:class:`JoinCallback` answers that POST: it verifies the assertion against your issuer's
JWKS (``typ`` ``poppy-join+jwt``, ``iss``, ``aud`` = your callback URL, lifetime, one-use
``jti``), then sets **your own** cookie (``__Host-poppy-join``: ``Secure; HttpOnly;
SameSite=Lax; Path=/``, no ``Max-Age``), MACed with your ``cookie_secret`` so nobody can
forge or edit it, and sends the browser on to ``landing`` (303).

:meth:`JoinCallback.view` reads that cookie and asks Frontdoor's
``POST {issuer}/poppy/session-state`` about the Session on every page view, so the cookie
never outlives the Session [S §6]: once the Session has ended (or the agent is blocked)
the view is "not joined" and the cookie is deleted. The joined browser is a **guest**
unless the agent's join carried a live access token; then it is signed in to that
account with that token's scopes, for as long as that sign-in stays live (a revoked or
disconnected sign-in leaves a guest). Never treat a guest as a user. Like the verifier it
fails closed: no answer from Frontdoor is :class:`JoinStateUnavailable`.

Example (any framework)::

    join = JoinCallback(ISSUER, credential, callback_url="https://shop.example/poppy/join",
                        cookie_secret=SECRET)              # once, at start-up; aclose() at shutdown

    # POST /poppy/join
    answer = await join.receive(await request.body(), content_type=request.headers.get("content-type"))
    return Response(answer.body, status=answer.status, headers=answer.headers)

    # any page
    view = await join.view(request.headers.get("cookie"))
    if view.browser is not None and view.browser.signed_in: ...   # view.browser.account
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass, field
from typing import Final

import httpx
import msgspec
from frontdoor_protocol.base64url import b64url_decode, b64url_encode
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.join_assertion import JoinClaims, verify_join_assertion
from frontdoor_protocol.jws_verification import UnknownKeyId

from frontdoor_sdk._browser_join_common import (
    check_cookie_name,
    cookie_value,
    expired_cookie,
    form_assertion,
    granted_scopes,
    set_cookie,
)
from frontdoor_sdk.clock import Clock, epoch_seconds, utc_now
from frontdoor_sdk.jwks_cache import JwksCache, JwksUnavailable
from frontdoor_sdk.replay_cache import InMemoryReplayCache, ReplayCache
from frontdoor_sdk.session_state import SessionStateClient, SessionStateRefused, SessionStateUnavailable

__all__ = ["JOIN_COOKIE", "JoinAnswer", "JoinCallback", "JoinStateUnavailable", "JoinView", "JoinedBrowser"]

JOIN_COOKIE: Final = "__Host-poppy-join"
"""The cookie's name: ``__Host-`` makes browsers insist on ``Secure``, ``Path=/`` and no ``Domain``."""

_LOG: Final = logging.getLogger("frontdoor_sdk")
_MAX_COOKIE: Final = 3072
_MAX_AGE: Final = 24 * 3600
_HTML: Final = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "Content-Type": "text/html; charset=utf-8"}
_REFUSED_PAGE: Final = (
    b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Not joined</title></head>\n"
    b"<body><h1>This browser could not join the agent's session</h1>\n"
    b"<p>The join is not valid, has expired or was already used. Ask the agent to try again.</p></body></html>\n"
)
_UNAVAILABLE_PAGE: Final = (
    b"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Try again</title></head>\n"
    b"<body><h1>Please try again in a moment</h1></body></html>\n"
)


class JoinStateUnavailable(Exception):
    """Frontdoor did not answer usably: serve 503 (with ``Retry-After``), never a signed-in page."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class JoinedBrowser:
    """Who drives a joined browser, as it is now.

    Attributes:
        client_id: The personal agent.
        user_id: The Session's User ID (the agent's ``sub``; not an account).
        sid: The agent's Session ID.
        frontdoor_session_id: Frontdoor's ``ses_`` ID of the Session.
        agent_id: The Session's ``agent_id``, if any.
        signed_in: Whether the join carried a sign-in that is still live.
        account: Your account ID when signed in, else ``None``: a guest.
        scopes: The join's access-token scopes when signed in, else empty.
    """

    client_id: str
    user_id: str
    sid: str
    frontdoor_session_id: str
    agent_id: str | None
    signed_in: bool
    account: str | None
    scopes: frozenset[str]

    @property
    def is_guest(self) -> bool:
        """True when the browser acts for no account."""
        return not self.signed_in


@dataclass(frozen=True)
class JoinAnswer:
    """The complete HTTP answer to the callback POST: send it as it is.

    Attributes:
        status: 303 (joined), 400 (refused: no cookie), 503 (Frontdoor unavailable).
        headers: ``Location`` and ``Set-Cookie`` when joined; ``Cache-Control`` always.
        body: A short HTML page (empty for a 303).
        browser: Who drives the browser, when joined.
        reason: Why it was refused, for your logs (never a value from the assertion).
    """

    status: int
    headers: dict[str, str]
    body: bytes = b""
    browser: JoinedBrowser | None = None
    reason: str | None = None


@dataclass(frozen=True)
class JoinView:
    """What a page view knows about the browser; send :attr:`headers` with the page."""

    browser: JoinedBrowser | None
    headers: dict[str, str] = field(default_factory=dict)


class _Cookie(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    c: str  # client_id
    s: str  # sid
    u: str  # sub
    f: str  # Frontdoor's ses_ ID
    i: int  # joined at
    a: str | None = None  # agent_id
    n: str | None = None  # account
    p: str | None = None  # scope
    g: str | None = None  # sgn


class JoinCallback:
    """Receives 1.0 browser joins and tells your pages who drives the browser.

    Args:
        issuer: Your Frontdoor issuer, ``auth.issuer`` in ``poppy.json``.
        credential: Your resource-server credential (``fdrs_...``).
        callback_url: This callback's URL exactly as set in ``protocol.join_callback_url``.
        cookie_secret: At least 32 random bytes, the same on every replica; it MACs the cookie.
        http: The client to reach Frontdoor with; one is created if omitted.
        clock: The time source.
        replay: Where used assertion ``jti`` values are remembered; share one across replicas.
        landing: Where the joined browser goes next (a path of your site).
        cookie_name: The cookie's name; keep the ``__Host-`` prefix.
        timeout: Seconds one call to Frontdoor may take.
    """

    def __init__(self, issuer: str, credential: str, *, callback_url: str, cookie_secret: bytes,
                 http: httpx.AsyncClient | None = None, clock: Clock | None = None, replay: ReplayCache | None = None,
                 landing: str = "/", cookie_name: str = JOIN_COOKIE, timeout: float = 5.0) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        if not issuer or issuer.endswith("/"):
            raise ValueError("issuer must be your Frontdoor issuer URL, without a trailing slash")
        if len(cookie_secret) < 32:
            raise ValueError("cookie_secret needs at least 32 random bytes")
        if not landing.startswith("/") or landing.startswith("//"):
            raise ValueError("landing must be a path of your site, such as /")
        check_cookie_name(cookie_name)
        self._issuer = issuer
        self._callback_url = callback_url
        self._key = hashlib.sha256(b"frontdoor-sdk/join-cookie/v1\x00" + cookie_secret).digest()
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._clock = clock or utc_now
        self._replay = replay or InMemoryReplayCache(clock=self._clock)
        self._jwks = JwksCache(f"{issuer}/jwks.json", self._http, self._clock, timeout=timeout)
        self._state = SessionStateClient(f"{issuer}/poppy/session-state", credential, self._http, timeout=timeout)
        self._landing = landing
        self.cookie_name = cookie_name

    def __repr__(self) -> str:
        return f"JoinCallback({self._callback_url!r})"  # Never the credential or the secret.

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> JoinCallback:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def expired_cookie(self) -> str:
        """A ``Set-Cookie`` value that deletes the browser's cookie."""
        return expired_cookie(self.cookie_name)

    def _seal(self, payload: _Cookie) -> str:
        body = b64url_encode(msgspec.json.encode(payload))
        mac = hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest()
        return f"{body}.{b64url_encode(mac)}"

    def _open(self, value: str) -> _Cookie | None:
        if len(value) > _MAX_COOKIE or value.count(".") != 1:
            return None
        body, _, mac = value.partition(".")
        try:
            given = b64url_decode(mac)
            expected = hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest()
            if not hmac.compare_digest(given, expected):
                return None
            payload = msgspec.json.decode(b64url_decode(body), type=_Cookie)
        except (ValueError, UnicodeEncodeError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if not 0 <= epoch_seconds(self._clock) - payload.i <= _MAX_AGE:
            return None
        return payload

    async def _verify(self, assertion: str) -> JoinClaims:
        now = int(epoch_seconds(self._clock))
        keys = await self._jwks.keys()
        try:
            return verify_join_assertion(assertion, issuer=self._issuer, audience=self._callback_url, keys=keys,
                                         now=now)
        except UnknownKeyId:
            fresh = await self._jwks.refresh_for_unknown_kid()
            if fresh is None:
                raise
            return verify_join_assertion(assertion, issuer=self._issuer, audience=self._callback_url, keys=fresh,
                                         now=now)

    async def receive(self, body: bytes, *, content_type: str | None) -> JoinAnswer:
        """Answer the browser's POST to your join callback.

        Args:
            body: The raw request body (a form with ``assertion``).
            content_type: The request's ``Content-Type``.
        """
        assertion = form_assertion(body, content_type)
        if assertion is None:
            return JoinAnswer(400, dict(_HTML), _REFUSED_PAGE, reason="malformed_request")
        try:
            claims = await self._verify(assertion)
        except JwksUnavailable:
            return JoinAnswer(503, {**_HTML, "Retry-After": "5"}, _UNAVAILABLE_PAGE, reason="unavailable")
        except ProtocolError:
            return JoinAnswer(400, dict(_HTML), _REFUSED_PAGE, reason="invalid_assertion")
        if not await self._replay.first_use(f"join:{claims.jti}", until=claims.exp + 60):
            return JoinAnswer(400, dict(_HTML), _REFUSED_PAGE, reason="replayed")
        payload = _Cookie(c=claims.client_id, s=claims.sid, u=claims.sub, f=claims.session,
                          i=int(epoch_seconds(self._clock)), a=claims.agent_id, n=claims.account, p=claims.scope,
                          g=claims.sgn)
        try:
            browser = await self._check(payload)
        except JoinStateUnavailable as exc:
            return JoinAnswer(503, {**_HTML, "Retry-After": str(exc.retry_after)}, _UNAVAILABLE_PAGE,
                              reason="unavailable")
        if browser is None:
            return JoinAnswer(400, dict(_HTML), _REFUSED_PAGE, reason="session_not_live")
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "Location": self._landing,
                   "Set-Cookie": set_cookie(self.cookie_name, self._seal(payload))}
        return JoinAnswer(303, headers, browser=browser)

    async def _check(self, payload: _Cookie) -> JoinedBrowser | None:
        """The Session's state now; a page view is no Session JWT, so its ``jti`` is a fresh random one."""
        try:
            state = await self._state.check(client_id=payload.c, sid=payload.s, sub=payload.u,
                                            jti=f"join-view-{secrets.token_urlsafe(16)}",
                                            iat=int(epoch_seconds(self._clock)), agent_id=payload.a, sgn=payload.g)
        except SessionStateUnavailable as exc:
            retry = int(exc.retry_after) if exc.retry_after and exc.retry_after.isdigit() else 5
            raise JoinStateUnavailable("Frontdoor could not tell the Session's state", retry) from None
        except SessionStateRefused:
            raise JoinStateUnavailable("Frontdoor refused the resource-server credential") from None
        if state.state != "active" or state.session != payload.f:
            return None
        signed_in = payload.g is not None and state.signed_in and state.account == payload.n
        scopes = granted_scopes(signed_in, payload.p)
        return JoinedBrowser(client_id=payload.c, user_id=payload.u, sid=payload.s, frontdoor_session_id=payload.f,
                             agent_id=payload.a, signed_in=signed_in, account=payload.n if signed_in else None,
                             scopes=scopes)

    async def view(self, cookie_header: str | None) -> JoinView:
        """Who drives this browser now: ``None`` without a (live) join.

        Raises:
            JoinStateUnavailable: Frontdoor did not answer: answer 503, never assume.
        """
        value = cookie_value(cookie_header, self.cookie_name)
        if value is None:
            return JoinView(None)
        payload = self._open(value)
        browser = await self._check(payload) if payload is not None else None
        if browser is None:
            return JoinView(None, {"Set-Cookie": self.expired_cookie()})
        return JoinView(browser)
