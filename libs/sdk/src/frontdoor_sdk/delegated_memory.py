"""PAP 1.0 Session state in memory, kept by the Shared Signals receiver (ADR 0005 §7).

A 1.0 request names its Session by (``client_id``, the agent's ``sid``) and, when signed
in, its grant family by the access token's ``sgn``. Frontdoor's ``session-state`` answer
for one (``client_id``, ``sid``, ``sgn``) is held here while the stream is live, with the
``sub`` and ``agent_id`` it was asked for (a request naming others is asked again, and
Frontdoor answers ``mismatch``). Held answers are only ``active`` ones.

Events drop what they touch, never less: a ``session-revoked`` or ``token-claims-change``
for a Session drops every answer of that Frontdoor Session (``ses_...``); a
``session-revoked`` for an application drops that agent's; a ``credential-change`` (a
grant family ended) drops the answers carrying that ``sgn``; anything wider (the agent
policy) drops everything.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import msgspec

from frontdoor_sdk.session_state import DelegatedState

__all__ = ["DelegatedMemory", "HeldDelegated"]

_CAEP: Final = "https://schemas.openid.net/secevent/caep/event-type/"
_SESSION_REVOKED: Final = _CAEP + "session-revoked"
_CLAIMS_CHANGE: Final = _CAEP + "token-claims-change"
_CREDENTIAL_CHANGE: Final = _CAEP + "credential-change"

_Key = tuple[str, str, str | None]


class HeldDelegated(msgspec.Struct, frozen=True, kw_only=True):
    """Frontdoor's active answer about one (``client_id``, ``sid``, ``sgn``)."""

    session: str
    sub: str
    agent_id: str | None
    signed_in: bool
    account: str | None
    scope: str | None
    stored_at: float


class DelegatedMemory:
    """Bounded, least recently used; ``max_age`` seconds per answer (then asked again)."""

    def __init__(self, *, max_entries: int, max_age: float, monotonic: Callable[[], float]) -> None:
        self._max = max_entries
        self._max_age = max_age
        self._monotonic = monotonic
        self._held: OrderedDict[_Key, HeldDelegated] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def lookup(self, *, client_id: str, sid: str, sub: str, agent_id: str | None,
               sgn: str | None) -> DelegatedState | None:
        key = (client_id, sid, sgn)
        held = self._held.get(key)
        if held is None:
            return None
        if self._monotonic() - held.stored_at >= self._max_age:
            del self._held[key]
            return None
        if held.sub != sub or held.agent_id != agent_id:
            return None  # Frontdoor decides (``mismatch``)
        self._held.move_to_end(key)
        return DelegatedState(state="active", session=held.session, signed_in=held.signed_in, account=held.account,
                              scope=held.scope)

    def remember(self, *, client_id: str, sid: str, sub: str, agent_id: str | None, sgn: str | None,
                 state: DelegatedState) -> None:
        if state.state != "active" or state.session is None or (sgn is not None and not state.signed_in):
            return
        key = (client_id, sid, sgn)
        self._held[key] = HeldDelegated(session=state.session, sub=sub, agent_id=agent_id, signed_in=state.signed_in,
                                        account=state.account, scope=state.scope, stored_at=self._monotonic())
        self._held.move_to_end(key)
        while len(self._held) > self._max:
            self._held.popitem(last=False)

    def clear(self) -> None:
        self._held.clear()

    def apply(self, uri: str, subject: dict[str, Any]) -> None:
        """One verified event (the receiver checked it and its order)."""
        session = _id(subject.get("session"), "id")
        client = _id(subject.get("application"), "uri")
        family = _id(subject.get("user"), "id")
        if uri in (_SESSION_REVOKED, _CLAIMS_CHANGE) and session is not None:
            self._drop(lambda key, held: held.session == session)
        elif uri == _SESSION_REVOKED and client is not None:
            self._drop(lambda key, held: key[0] == client)
        elif uri == _CREDENTIAL_CHANGE and family is not None:
            self._drop(lambda key, held: key[2] == family)
        elif uri == _CREDENTIAL_CHANGE and client is not None:
            self._drop(lambda key, held: key[0] == client and key[2] is not None)
        else:
            self._held.clear()

    def _drop(self, matches: Callable[[_Key, HeldDelegated], bool]) -> None:
        for key in [k for k, held in self._held.items() if matches(k, held)]:
            del self._held[key]


def _id(member: object, field: str) -> str | None:
    if isinstance(member, dict):
        value = member.get(field)
        return value if isinstance(value, str) else None
    return None
