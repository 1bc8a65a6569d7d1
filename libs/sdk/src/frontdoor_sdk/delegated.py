"""The PAP 1.0 way through :class:`FrontdoorVerifier`: a request carrying ``Poppy-Session``.

Order, cheapest and most local first (ADR 0004 §3, §6):

1. :func:`frontdoor_protocol.parse_delegated_request`: one ``Poppy-Session`` header, at most
   one ``Authorization`` credential, no token in the URL.
2. The agent's identity keys from :class:`AgentKeysCache` (``POST {issuer}/poppy/agent-keys``,
   cached per client for the ``max_age`` Frontdoor gives; an unknown delegation ``kid``
   asks again, at most every 30 s per client) and, when an access token came, the
   issuer's keys from the JWKS cache.
3. :func:`frontdoor_protocol.verify_delegated_request`: the delegation (a delegation that
   verified before is remembered in the path's :class:`~frontdoor_protocol.DelegationCache`,
   keyed by its exact string and the identity key that verified it), the Session JWT
   (``aud`` = the issuer, ``htm``/``htu``, ``iat`` within ``session_max_age``), ``ath``, the
   access token (RFC 9068, same client) and its DPoP proof.
4. The Session JWT's ``jti`` in the sdk's own replay cache, then ``POST
   {issuer}/poppy/session-state`` (which claims the ``jti`` too, across replicas): a replay
   is ``invalid_session`` [Q12], an ended Session ``session_ended``, a revoked sign-in with
   its access token ``invalid_token`` (ADR 0004 §5).
5. The route's scopes: without an access token ``sign_in_required`` (401 with the
   ``resource_metadata`` challenge), else ``insufficient_scope``.

Every refusal is rendered by :func:`frontdoor_sdk.refusal.delegated_refusal`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from frontdoor_protocol import (
    ChallengeScheme,
    DelegatedCaller,
    DelegatedRequest,
    DelegationCache,
    ErrorCode,
    ProtocolError,
    RequestHeaders,
    UnknownAgentKeyId,
    UnknownKeyId,
    parse_scope,
    verify_delegated_request,
)
from joserfc.jwk import KeySet

from frontdoor_sdk.agent_keys import AgentKeysCache, AgentKeysRefused, AgentKeysUnavailable, AgentRefused
from frontdoor_sdk.caller import Caller, check_scopes
from frontdoor_sdk.clock import Clock, epoch_seconds
from frontdoor_sdk.jwks_cache import JwksCache, JwksUnavailable
from frontdoor_sdk.replay_cache import ReplayCache
from frontdoor_sdk.session_state import (
    DelegatedState,
    SessionStateClient,
    SessionStateRefused,
    SessionStateUnavailable,
)
from frontdoor_sdk.signals import SessionSignals

__all__ = ["DelegatedPath", "DelegatedRefused"]

_EMPTY: Final = KeySet([])
_REPLAY_MARGIN: Final = 5
"""Seconds a Session JWT ``jti`` is remembered past the end of its ``iat`` window."""


class DelegatedRefused(Exception):
    """A 1.0 refusal with the ``Retry-After`` Frontdoor gave, if any."""

    def __init__(self, error: ProtocolError, retry_after: str | None = None) -> None:
        super().__init__(error.code.value)
        self.error = error
        self.retry_after = retry_after


def _invalid_session(description: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_SESSION, description)


def _unavailable(description: str, retry_after: str | None = None) -> DelegatedRefused:
    return DelegatedRefused(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, description), retry_after)


def _misconfigured() -> DelegatedRefused:
    return DelegatedRefused(ProtocolError(ErrorCode.SERVER_ERROR, "the resource is misconfigured"))


class DelegatedPath:
    """Verifies ``Poppy-Session`` requests; built and owned by :class:`FrontdoorVerifier`.

    Args:
        issuer: The tenant's issuer: the Session JWT's ``aud`` and the access tokens' ``iss``.
        agent_keys: The per-client identity key cache.
        issuer_keys: The issuer's JWKS cache (shared with the 0.2 way).
        states: The session-state client.
        replays: The replay cache (shared with the 0.2 way's proof ``jti`` values).
        clock: The time source.
        session_max_age: Seconds a Session JWT's ``iat`` may be away from now (±).
        allow_http_loopback: Accept ``http://`` loopback client IDs and URLs (dev only).
        delegations: The verified-delegation cache; a new one (10,000 delegations) if omitted.
    """

    def __init__(
        self,
        *,
        issuer: str,
        agent_keys: AgentKeysCache,
        issuer_keys: JwksCache,
        states: SessionStateClient,
        replays: ReplayCache,
        clock: Clock,
        session_max_age: int,
        allow_http_loopback: bool,
        delegations: DelegationCache | None = None,
        signals: SessionSignals | None = None,
    ) -> None:
        self._issuer = issuer
        self._agent_keys = agent_keys
        self._issuer_keys = issuer_keys
        self._states = states
        self._replays = replays
        self._clock = clock
        self._max_age = session_max_age
        self._loopback = allow_http_loopback
        self._delegations = delegations if delegations is not None else DelegationCache()
        self._signals = signals

    @property
    def delegations(self) -> DelegationCache:
        """The verified-delegation cache: pass it to ``parse_delegated_request`` too."""
        return self._delegations

    async def verify(
        self,
        method: str,
        url: str,
        headers: RequestHeaders,
        request: DelegatedRequest,
        *,
        required_scopes: Sequence[str],
        audiences: Sequence[str],
    ) -> Caller:
        """Verify one parsed 1.0 request (see the module docstring).

        Raises:
            ProtocolError: The refusal.
            DelegatedRefused: A refusal with a ``Retry-After`` (503) or a 500.
        """
        client_id = request.session.client_id
        identity = await self._identity_keys(client_id)
        issuer_keys = await self._issuer_keys_for(request)
        try:
            verified = self._check(method=method, url=url, request=request, identity=identity, issuer_keys=issuer_keys,
                                   audiences=audiences)
        except UnknownAgentKeyId:
            fresh = await self._refreshed_identity_keys(client_id)
            if fresh is None:
                raise _invalid_session("the delegation's key is not one of the agent's keys") from None
            verified = self._check(method=method, url=url, request=request, identity=fresh, issuer_keys=issuer_keys,
                                   audiences=audiences)
        except UnknownKeyId:
            try:
                reloaded = await self._issuer_keys.refresh_for_unknown_kid()
            except JwksUnavailable:
                raise _unavailable("the issuer's keys are unavailable") from None
            if reloaded is None:
                raise
            verified = self._check(method=method, url=url, request=request, identity=identity, issuer_keys=reloaded,
                                   audiences=audiences)
        await self._claim_locally(verified)
        state = await self._state(verified)
        caller = _caller(verified, state)
        missing = check_scopes(caller, required_scopes)
        if missing is not None:
            raise missing
        return caller

    async def _identity_keys(self, client_id: str) -> KeySet:
        try:
            return await self._agent_keys.keys(client_id)
        except AgentRefused:
            raise _invalid_session("this agent is not accepted") from None
        except AgentKeysUnavailable as down:
            raise _unavailable("the agent's keys are unavailable", down.retry_after) from None
        except AgentKeysRefused:
            raise _misconfigured() from None

    async def _refreshed_identity_keys(self, client_id: str) -> KeySet | None:
        try:
            return await self._agent_keys.refresh_for_unknown_kid(client_id)
        except AgentRefused:
            raise _invalid_session("this agent is not accepted") from None
        except AgentKeysUnavailable as down:
            raise _unavailable("the agent's keys are unavailable", down.retry_after) from None
        except AgentKeysRefused:
            raise _misconfigured() from None

    async def _issuer_keys_for(self, request: DelegatedRequest) -> KeySet:
        if request.access_token is None:
            return _EMPTY  # Signed out: no issuer key is needed, so none is fetched.
        try:
            return await self._issuer_keys.keys()
        except JwksUnavailable:
            raise _unavailable("the issuer's keys are unavailable") from None

    def _check(
        self,
        *,
        method: str,
        url: str,
        request: DelegatedRequest,
        identity: KeySet,
        issuer_keys: KeySet,
        audiences: Sequence[str],
    ) -> DelegatedCaller:
        try:
            return verify_delegated_request(
                request,
                method=method,
                url=url,
                identity_keys=identity,
                issuer_keys=issuer_keys,
                issuer=self._issuer,
                now=int(epoch_seconds(self._clock)),
                audiences=audiences,
                max_age=self._max_age,
                allow_http_loopback=self._loopback,
                delegations=self._delegations,
            )
        except ProtocolError:
            raise  # UnknownKeyId included: the caller reloads keys
        except ValueError:
            # A request URL that is not an absolute http(s) URL (e.g. a bad Host header).
            raise _invalid_session("the request URL is not valid") from None

    async def _claim_locally(self, verified: DelegatedCaller) -> None:
        session = verified.session
        # Remembered for the whole iat window (ADR 0004 §3): after it the JWT is stale anyway.
        until = session.iat + self._max_age + _REPLAY_MARGIN
        if not await self._replays.first_use(f"pap10.{session.client_id}.{session.jti}", until=until):
            raise _invalid_session("the Poppy-Session JWT was already used")
        proof = verified.proof
        if proof is not None and not await self._replays.first_use(
            f"{proof.jkt}.{proof.jti}", until=proof.accept_until
        ):
            raise ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "DPoP proof was already used")

    async def _state(self, verified: DelegatedCaller) -> DelegatedState:
        session = verified.session
        token = verified.token
        sgn = token.sgn if token is not None else None
        signals = self._signals
        mark = 0
        if signals is not None:  # the Shared Signals stream (ADR 0005 §7): no round trip while it is live
            held = signals.lookup_delegated(client_id=session.client_id, sid=session.sid, sub=session.sub,
                                            agent_id=session.agent_id, sgn=sgn)
            if held is not None:
                return held
            mark = signals.mark()
        try:
            state = await self._states.check(
                client_id=session.client_id,
                sid=session.sid,
                sub=session.sub,
                jti=session.jti,
                iat=session.iat,
                agent_id=session.agent_id,
                sgn=token.sgn if token is not None else None,
            )
        except SessionStateUnavailable as down:
            raise _unavailable("the Session's state is unavailable", down.retry_after) from None
        except SessionStateRefused:
            raise _misconfigured() from None
        if state.state == "ended":
            raise ProtocolError(ErrorCode.SESSION_ENDED, "the Session has ended")
        if state.state == "replayed":
            raise _invalid_session("the Poppy-Session JWT was already used")
        if state.state == "mismatch":
            raise _invalid_session("the Session JWT does not match its Session")
        if state.state != "active":
            raise _invalid_session("this agent is not accepted")
        if token is not None and not state.signed_in:
            # The grant family was revoked or disconnected: the token fails, the Session
            # goes on signed out (ADR 0004 §5).
            raise ProtocolError(ErrorCode.INVALID_TOKEN, "the access token is no longer active")
        if signals is not None:
            signals.remember_delegated(client_id=session.client_id, sid=session.sid, sub=session.sub,
                                       agent_id=session.agent_id, sgn=sgn, state=state, mark=mark)
        return state


def _caller(verified: DelegatedCaller, state: DelegatedState) -> Caller:
    session = verified.session
    token = verified.token
    signed_in = token is not None and state.signed_in
    token_type: ChallengeScheme | None = verified.scheme if token is not None else None
    return Caller(
        client_id=session.client_id,
        user_id=session.sub,
        session_id=session.sid,
        signed_in=signed_in,
        account=token.sub if signed_in and token is not None else None,
        scopes=_scopes(token.scope) if signed_in and token is not None else frozenset(),
        token_type=None if token_type is None else ("DPoP" if token_type is ChallengeScheme.DPOP else "Bearer"),
        profile="1.0",
        agent_id=session.agent_id,
        frontdoor_session_id=state.session,
    )


def _scopes(scope: str | None) -> frozenset[str]:
    if not scope:
        return frozenset()
    try:
        return frozenset(parse_scope(scope))
    except ValueError:
        return frozenset()
