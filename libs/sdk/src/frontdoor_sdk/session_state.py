"""A PAP 1.0 Session's state, from ``POST {issuer}/poppy/session-state`` (ADR 0004 §6).

Asked once per request, after every signature verified locally. Frontdoor claims the
Session JWT's ``jti`` (so a replay to another replica, or to Frontdoor's own endpoints,
is caught), creates the Session at first sight or checks that ``sub`` and ``agent_id``
did not change, and says whether the access token's grant family (``sgn``) is live and
belongs to this client. It fails closed: anything but a well-formed answer is
:class:`SessionStateUnavailable`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from frontdoor_sdk._frontdoor_call import FrontdoorHTTP, Unavailable, decode_answer, post

__all__ = ["DelegatedState", "SessionStateClient", "SessionStateRefused", "SessionStateUnavailable"]

_MAX_BYTES: Final = 64 * 1024


class SessionStateUnavailable(Unavailable):
    """Frontdoor gave no usable answer (network, 429, 5xx, malformed): answer 503.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """


class SessionStateRefused(Exception):
    """Frontdoor refused the resource-server credential (401/403): a configuration error."""


class DelegatedState(msgspec.Struct, frozen=True, kw_only=True):
    """Frontdoor's answer about one 1.0 request.

    Attributes:
        state: ``active``; ``ended`` (the Session was ended: ``session_ended``);
            ``mismatch`` (``sub`` or ``agent_id`` changed), ``replayed`` (the ``jti`` was
            seen) or ``refused`` (the agent is blocked): ``invalid_session``.
        session: Frontdoor's ``ses_...`` ID of the Session.
        signed_in: Whether the request's ``sgn`` is a live sign-in of this client.
        account: The account of that sign-in, when signed in.
        scope: Its scopes, space-separated, when signed in.
    """

    state: Literal["active", "ended", "mismatch", "replayed", "refused"]
    session: str | None = None
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None


class SessionStateClient:
    """Asks Frontdoor about 1.0 Sessions.

    Args:
        url: ``{issuer}/poppy/session-state``.
        credential: The resource-server credential (``fdrs_...``).
        http: The client to ask with: an ``httpx.AsyncClient``, or the verifier's lean one.
        timeout: Seconds one answer may take.
    """

    def __init__(self, url: str, credential: str, http: FrontdoorHTTP, *, timeout: float = 5.0) -> None:
        self._url = url
        self._authorization = f"Bearer {credential}"
        self._http = http
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"SessionStateClient({self._url!r})"  # Never the credential.

    async def check(
        self,
        *,
        client_id: str,
        sid: str,
        sub: str,
        jti: str,
        iat: int,
        agent_id: str | None = None,
        sgn: str | None = None,
    ) -> DelegatedState:
        """Claim the ``jti`` and read the Session's state.

        Args:
            client_id: The verified Session JWT's ``iss``.
            sid: Its ``sid``.
            sub: Its ``sub``.
            jti: Its ``jti``.
            iat: Its ``iat``.
            agent_id: Its ``agent_id``, if any.
            sgn: The verified access token's ``sgn``, when the request carried one.

        Returns:
            Frontdoor's answer.

        Raises:
            SessionStateUnavailable: No usable answer; fail closed.
            SessionStateRefused: The credential was refused.
        """
        body: dict[str, Any] = {"client_id": client_id, "sid": sid, "sub": sub, "jti": jti, "iat": iat}
        if agent_id is not None:
            body["agent_id"] = agent_id
        if sgn is not None:
            body["sgn"] = sgn
        response = await post(
            self._http,
            self._url,
            json=body,
            authorization=self._authorization,
            seconds=self._timeout,
            endpoint="session-state",
            unavailable=SessionStateUnavailable,
            max_bytes=_MAX_BYTES,
        )
        return decode_answer(
            response,
            DelegatedState,
            endpoint="session-state",
            nothing="no state",
            max_bytes=_MAX_BYTES,
            unavailable=SessionStateUnavailable,
            refused=SessionStateRefused,
        )
