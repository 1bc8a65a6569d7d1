"""Session state in memory, kept true by Frontdoor's Shared Signals stream (ADR 0005).

:class:`SessionSignals` is the receiver of one stream (RFC 8936 poll, SSF 1.0, CAEP
events). A background task creates the stream (``POST {issuer}/ssf/streams`` with the
resource-server credential), then polls it in a loop: Frontdoor holds a poll open until
an event commits or ~2 s pass, and every answer that is ``live`` renews a **lease**. The
receiver counts the lease from the moment it *sent* that poll, so it always ends before
Frontdoor's own record of it.

Each SET is verified before it is applied: the issuer's signature (its JWKS), ``typ``
``secevent+jwt``, ``alg`` ES256, ``iss`` the issuer, ``aud`` this stream, ``iat`` not in
the future, ``jti`` not applied before, exactly one known CAEP event, and ``seq`` the next
position. Events are applied in ``seq`` order and acknowledged in the next poll.

:meth:`lookup` answers from memory only while the lease runs and nothing is missing. A
sequence gap, a SET that fails verification, or a ``behind`` answer (a revoke did not
get this stream's acknowledgement in time) drops everything held and resynchronises;
meanwhile, and whenever the stream is down, the verifier asks Frontdoor per request.
The exact guarantee is in docs/sdk.md ("Session state from the stream").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import httpx
import msgspec
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from frontdoor_sdk.clock import Clock, epoch_seconds
from frontdoor_sdk.delegated_memory import DelegatedMemory
from frontdoor_sdk.introspection import SessionState
from frontdoor_sdk.jwks_cache import JwksCache, JwksUnavailable
from frontdoor_sdk.session_state import DelegatedState

__all__ = ["CachedSession", "SessionSignals"]

_LOG: Final = logging.getLogger("frontdoor_sdk")
_CAEP: Final = "https://schemas.openid.net/secevent/caep/event-type/"
_SESSION_REVOKED: Final = _CAEP + "session-revoked"
_CLAIMS_CHANGE: Final = _CAEP + "token-claims-change"
_CREDENTIAL_CHANGE: Final = _CAEP + "credential-change"
_KNOWN: Final = frozenset({_SESSION_REVOKED, _CLAIMS_CHANGE, _CREDENTIAL_CHANGE})
_SET_TYPE: Final = "secevent+jwt"
_LEASE_MARGIN_S: Final = 0.25
_SKEW_S: Final = 60
_MAX_BYTES: Final = 4 * 1024 * 1024
_MAX_JTIS: Final = 100_000


class CachedSession(msgspec.Struct, frozen=True, kw_only=True):
    """What the receiver holds about one 0.2 Session (by its ``sid``)."""

    client_id: str
    sub: str
    signed_in: bool
    account: str | None
    scope: str | None
    stored_at: float


class _Poll(msgspec.Struct, frozen=True, kw_only=True):
    sets: dict[str, str] = msgspec.field(default_factory=dict)
    moreAvailable: bool = False  # RFC 8936 names it so
    position: int
    lease: float | None = None
    state: str = "live"


class _Stream(msgspec.Struct, frozen=True, kw_only=True):
    stream_id: str
    aud: str
    delivery: dict[str, str]


class _Rejected(Exception):
    def __init__(self, err: str) -> None:
        super().__init__(err)
        self.err = err


class SessionSignals:
    """The stream's receiver and the bounded, least-recently-used memory of Sessions.

    It holds 0.2 Sessions (by ``sid``) and PAP 1.0 ``session-state`` answers (by
    ``client_id``, ``sid`` and ``sgn``: :mod:`frontdoor_sdk.delegated_memory`), each up to
    ``max_sessions``.

    Args:
        issuer: The tenant's issuer (the SETs' ``iss``).
        credential: The resource-server credential (``fdrs_...``).
        http: The client to poll with (keep-alive: one connection stays open).
        keys: The issuer's JWKS cache (shared with token verification).
        clock: The wall clock (for ``iat``).
        monotonic: Seconds from a monotonic clock (for the lease).
        max_sessions: The most Sessions held.
        max_age: Seconds one Session is answered from memory before it is asked again (so
            Frontdoor keeps its "last used" within a minute).
        retry: Seconds between attempts while Frontdoor cannot be reached.
    """

    def __init__(
        self,
        issuer: str,
        credential: str,
        http: httpx.AsyncClient,
        keys: JwksCache,
        clock: Clock,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        max_sessions: int = 10_000,
        max_age: float = 60.0,
        retry: float = 1.0,
    ) -> None:
        self._issuer = issuer
        self._authorization = f"Bearer {credential}"
        self._http = http
        self._keys = keys
        self._clock = clock
        self._monotonic = monotonic
        self._max_sessions = max_sessions
        self._max_age = max_age
        self._retry = retry
        self._sessions: OrderedDict[str, CachedSession] = OrderedDict()
        self._delegated = DelegatedMemory(max_entries=max_sessions, max_age=max_age, monotonic=monotonic)
        self._jtis: OrderedDict[str, None] = OrderedDict()
        self._stream: _Stream | None = None
        self._applied: int | None = None
        self._resync: int | None = None
        self._acks: list[str] = []
        self._errors: dict[str, dict[str, str]] = {}
        self._until = 0.0
        self._epoch = 0
        self._task: asyncio.Task[None] | None = None
        self.polls = 0
        self.resyncs = 0

    def __repr__(self) -> str:
        return f"SessionSignals({self._issuer!r})"  # Never the credential.

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the background task (idempotent); call it from the running event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="frontdoor-sdk-signals")

    async def aclose(self) -> None:
        """Stop the task; from now on nothing is answered from memory."""
        self._until = 0.0
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def live(self) -> bool:
        """Whether the lease runs and nothing is missing: memory may be trusted now."""
        return self._resync is None and self._monotonic() < self._until

    @property
    def position(self) -> int | None:
        """The stream position applied (every event up to it), once the stream exists."""
        return self._applied

    @property
    def stream_id(self) -> str | None:
        return None if self._stream is None else self._stream.stream_id

    # ------------------------------------------------------------------ the memory

    def lookup(self, sid: str) -> CachedSession | None:
        """The Session held under ``sid``, only while :attr:`live` and fresh."""
        if not self.live:
            return None
        entry = self._sessions.get(sid)
        if entry is None:
            return None
        if self._monotonic() - entry.stored_at >= self._max_age:
            del self._sessions[sid]
            return None
        self._sessions.move_to_end(sid)
        return entry

    def mark(self) -> int:
        """Read before asking Frontdoor; pass it to :meth:`remember` with the answer."""
        return self._epoch

    def remember(self, sid: str, state: SessionState, mark: int) -> None:
        """Hold Frontdoor's answer, unless an event was applied (or memory dropped) since ``mark``.

        An answer read before an event but arriving after it would undo the event: it is
        used for its request and not kept.
        """
        if mark != self._epoch or self._applied is None or not state.active or state.client_id is None:
            return
        self._sessions[sid] = CachedSession(client_id=state.client_id, sub=state.sub or "",
                                            signed_in=state.signed_in, account=state.account, scope=state.scope,
                                            stored_at=self._monotonic())
        self._sessions.move_to_end(sid)
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)

    def lookup_delegated(self, *, client_id: str, sid: str, sub: str, agent_id: str | None,
                         sgn: str | None) -> DelegatedState | None:
        """The 1.0 answer held for (``client_id``, ``sid``, ``sgn``), only while :attr:`live` and fresh."""
        if not self.live:
            return None
        return self._delegated.lookup(client_id=client_id, sid=sid, sub=sub, agent_id=agent_id, sgn=sgn)

    def remember_delegated(self, *, client_id: str, sid: str, sub: str, agent_id: str | None, sgn: str | None,
                           state: DelegatedState, mark: int) -> None:
        """Hold Frontdoor's ``session-state`` answer, under the same rule as :meth:`remember`."""
        if mark != self._epoch or self._applied is None:
            return
        self._delegated.remember(client_id=client_id, sid=sid, sub=sub, agent_id=agent_id, sgn=sgn, state=state)

    def _drop_all(self) -> None:
        self._sessions.clear()
        self._delegated.clear()
        self._epoch += 1

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        while True:
            try:
                if self._stream is None:
                    await self._create()
                await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception as failure:  # the loop must outlive any failure; the lease lapses
                _LOG.warning("frontdoor_sdk: the Shared Signals stream failed: %s", type(failure).__name__)
                await asyncio.sleep(self._retry)

    async def _create(self) -> None:
        response = await self._http.post(
            f"{self._issuer}/ssf/streams", json={"delivery": {"method": "urn:ietf:rfc:8936"}},
            headers={"Authorization": self._authorization, "Accept": "application/json"}, follow_redirects=False)
        if response.status_code != 201:
            raise RuntimeError(f"stream creation answered HTTP {response.status_code}")
        stream = msgspec.json.decode(response.content, type=_Stream)
        if stream.delivery.get("method") != "urn:ietf:rfc:8936" or not stream.delivery.get(
                "endpoint_url", "").startswith(f"{self._issuer}/ssf/streams/"):
            raise RuntimeError("stream creation answered an unusable delivery")
        self._stream = stream
        self._applied = None
        self._resync = None
        self._drop_all()

    async def _poll(self) -> None:
        stream = self._stream
        assert stream is not None
        body: dict[str, Any] = {"ack": list(self._acks), "maxEvents": 100, "returnImmediately": False}
        if self._errors:
            body["setErrs"] = dict(self._errors)
        if self._resync is not None:
            body["resync"] = self._resync
        sent = self._monotonic()
        response = await self._http.post(
            stream.delivery["endpoint_url"], json=body,
            headers={"Authorization": self._authorization, "Accept": "application/json"},
            timeout=30.0, follow_redirects=False)
        if response.status_code == 404:
            self._stream = None  # gone (deleted while unused): make a new one
            self._until = 0.0
            return
        if response.status_code != 200 or len(response.content) > _MAX_BYTES:
            raise RuntimeError(f"poll answered HTTP {response.status_code}")
        answer = msgspec.json.decode(response.content, type=_Poll)
        self.polls += 1
        self._acks = []
        self._errors = {}
        sent_resync = self._resync
        if answer.state == "behind":
            self._until = 0.0
            self._begin_resync(answer.position)
            return
        if sent_resync is not None:
            self._resync = None
            self._applied = max(sent_resync, answer.position)
        if self._applied is None:
            self._applied = answer.position
        if answer.position > self._applied:
            self._begin_resync(answer.position)  # Frontdoor holds us further than we applied: a gap
            return
        await self._apply_all(stream, answer)
        if self._resync is None and answer.lease is not None:
            self._until = sent + answer.lease - _LEASE_MARGIN_S

    def _begin_resync(self, position: int) -> None:
        """Drop everything held; the next poll says so (``resync``), then a lease may come."""
        self._drop_all()
        self._resync = max(position, self._applied or 0)
        self._applied = self._resync
        self.resyncs += 1

    async def _apply_all(self, stream: _Stream, answer: _Poll) -> None:
        decoded: list[tuple[int, str, dict[str, Any]]] = []
        for jti, token in answer.sets.items():
            try:
                claims = await self._verify(stream, jti, token)
            except _Rejected as rejected:
                self._errors[jti] = {"err": rejected.err, "description": "The SET was not accepted."}
                _LOG.warning("frontdoor_sdk: a SET was refused (%s)", rejected.err)
                continue
            decoded.append((int(claims["seq"]), jti, claims))
        decoded.sort(key=lambda item: item[0])
        for seq, jti, claims in decoded:
            assert self._applied is not None
            if seq <= self._applied or jti in self._jtis:
                self._acks.append(jti)  # seen already (a redelivery or a replay): never applied twice
                continue
            if seq != self._applied + 1:
                break  # a gap: the missing one may be a refused SET; resync below
            self._apply(claims)
            self._applied = seq
            self._acks.append(jti)
            self._jtis[jti] = None
            while len(self._jtis) > _MAX_JTIS:
                self._jtis.popitem(last=False)
        if self._errors or (decoded and self._applied is not None and decoded[-1][0] > self._applied):
            self._begin_resync(max([self._applied or 0, *(seq for seq, _, _ in decoded)]))
            self._acks.extend(jti for _, jti, _ in decoded if jti not in self._acks)

    async def _verify(self, stream: _Stream, jti: str, token: str) -> dict[str, Any]:
        try:
            keys = await self._keys.keys()
        except JwksUnavailable:
            raise RuntimeError("the issuer's keys are unavailable") from None
        try:
            decoded = _decode(token, keys)
        except _UnknownKid:
            try:
                fresh = await self._keys.refresh_for_unknown_kid()
            except JwksUnavailable:
                raise RuntimeError("the issuer's keys are unavailable") from None
            if fresh is None:
                raise _Rejected("invalid_key") from None
            decoded = _decode(token, fresh)
        header, claims = decoded
        if header.get("typ") != _SET_TYPE:
            raise _Rejected("invalid_request")
        if claims.get("iss") != self._issuer:
            raise _Rejected("invalid_issuer")
        aud = claims.get("aud")
        if aud != stream.aud and not (isinstance(aud, list) and stream.aud in aud):
            raise _Rejected("invalid_audience")
        iat = claims.get("iat")
        if not isinstance(iat, int) or iat > epoch_seconds(self._clock) + _SKEW_S:
            raise _Rejected("invalid_request")
        if claims.get("jti") != jti or not isinstance(claims.get("seq"), int):
            raise _Rejected("invalid_request")
        events = claims.get("events")
        if not isinstance(events, dict) or len(events) != 1 or next(iter(events)) not in _KNOWN:
            raise _Rejected("invalid_request")
        if not isinstance(claims.get("sub_id"), dict) or not isinstance(next(iter(events.values())), dict):
            raise _Rejected("invalid_request")
        return claims

    def _apply(self, claims: dict[str, Any]) -> None:
        """One event on the memory; anything it does not describe precisely drops more, not less."""
        (uri, event), = claims["events"].items()
        subject: dict[str, Any] = claims["sub_id"]
        session = _id(subject.get("session"), "id")
        client = _id(subject.get("application"), "uri")
        self._epoch += 1
        self._delegated.apply(uri, subject)  # the PAP 1.0 answers held (ADR 0005 §7)
        if uri == _SESSION_REVOKED:
            if session is not None:
                self._sessions.pop(session, None)
            elif client is not None:
                for sid in [s for s, e in self._sessions.items() if e.client_id == client]:
                    del self._sessions[sid]
            else:
                self._sessions.clear()
        elif uri == _CLAIMS_CHANGE:
            changed = event.get("claims") if isinstance(event.get("claims"), dict) else {}
            if session is None:
                self._sessions.clear()  # e.g. the agent policy changed: every Session is asked again
                return
            held = self._sessions.get(session)
            if held is None:
                return
            if changed.get("signed_in") is True and isinstance(changed.get("account"), str):
                scope = changed.get("scope")
                self._sessions[session] = msgspec.structs.replace(
                    held, signed_in=True, account=changed["account"], scope=scope if isinstance(scope, str) else None)
            elif changed.get("signed_in") is False:
                self._sessions[session] = msgspec.structs.replace(held, signed_in=False, account=None, scope=None)
            else:
                del self._sessions[session]
        # credential-change (a grant family ended): its Sessions' sign-outs come as their own events.


class _UnknownKid(Exception):
    pass


def _decode(token: str, keys: KeySet) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        result = jwt.decode(token, keys, algorithms=["ES256"])
    except InvalidKeyIdError:
        raise _UnknownKid from None
    except JoseError:
        raise _Rejected("invalid_key") from None
    except (ValueError, KeyError):
        raise _Rejected("invalid_key") from None
    return dict(result.header), dict(result.claims)


def _id(member: object, field: str) -> str | None:
    if isinstance(member, dict):
        value = member.get(field)
        return value if isinstance(value, str) else None
    return None
