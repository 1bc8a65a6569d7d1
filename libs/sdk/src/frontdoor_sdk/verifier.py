"""One call that decides a protected request: who is calling, or the refusal to send.

Order, cheapest and most local first:

1. The stateless checks of PAP §4.3 (:func:`frontdoor_protocol.verify_resource_request`):
   no token in the URL, one ``Authorization``, the Session Token's signature and claims
   against the issuer's cached JWKS (an unknown ``kid`` refetches it, at most once per
   ``jwks_min_refresh`` seconds), the scheme, the DPoP proof.
2. The proof's ``jti`` in the replay cache: a proof is accepted once (RFC 9449 §11.1).
3. The Session's state: from memory while the Shared Signals stream is live
   (``shared_signals=True``, :mod:`frontdoor_sdk.signals`), else from Frontdoor's
   introspection (every request unless ``state_cache_ttl`` is set): an inactive token is
   ``invalid_token``.
4. The route's scopes: ``sign_in_required`` when signed out, else ``insufficient_scope``.

It fails closed: when the keys or the state cannot be had, the answer is 503 with
``Retry-After`` (500 if Frontdoor refuses the credential), never "allow". A request with
no credential at all still gets its 401 challenge then: that needs no key.

PAP 1.0 on the same routes: a request carrying a ``Poppy-Session`` header goes the 1.0
way (:mod:`frontdoor_sdk.delegated`) when the verifier's ``profiles`` include ``"1.0"``;
every other request goes the 0.2 way above, unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Sequence
from typing import Final, Literal
from urllib.parse import urlsplit

import httpx
from frontdoor_protocol import (
    DEFAULT_SESSION_MAX_AGE,
    REQUIRED_DPOP_ALGORITHM,
    ChallengeScheme,
    ErrorCode,
    ProtocolError,
    RequestHeaders,
    SessionTokenClaims,
    UnknownKeyId,
    VerifiedCaller,
    VerifiedSignatures,
    authorization_credential,
    header_values,
    parse_delegated_request,
    parse_scope,
    poppy_session_value,
    verify_resource_request,
)
from joserfc.jwk import KeySet

from frontdoor_sdk._lean_http import LeanClient, lean_supports
from frontdoor_sdk.agent_keys import AgentKeysCache
from frontdoor_sdk.caller import Caller, Profile, check_scopes
from frontdoor_sdk.clock import Clock, epoch_seconds, utc_now
from frontdoor_sdk.delegated import DelegatedPath, DelegatedRefused
from frontdoor_sdk.dpop_nonces import DPoPNonces
from frontdoor_sdk.introspection import (
    IntrospectionRefused,
    IntrospectionUnavailable,
    Introspector,
    SessionState,
)
from frontdoor_sdk.jwks_cache import JwksCache, JwksUnavailable
from frontdoor_sdk.protected_resource import protected_resource_metadata_url, resource_origin
from frontdoor_sdk.refusal import Refusal, delegated_refusal, refusal
from frontdoor_sdk.replay_cache import InMemoryReplayCache, ReplayCache
from frontdoor_sdk.session_state import SessionStateClient
from frontdoor_sdk.signals import SessionSignals
from frontdoor_sdk.state_cache import StateCache

__all__ = ["FrontdoorVerifier"]

_ALGS: Final = (REQUIRED_DPOP_ALGORITHM,)
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
ALL_PROFILES: Final[tuple[Profile, ...]] = ("0.2", "1.0")
"""What a verifier serves by default: both profiles, on the same routes."""


def _check_profiles(profiles: Collection[str]) -> frozenset[Literal["0.2", "1.0"]]:
    chosen: set[Literal["0.2", "1.0"]] = set()
    for profile in profiles:
        if profile == "0.2":
            chosen.add("0.2")
        elif profile == "1.0":
            chosen.add("1.0")
        else:
            raise ValueError('profiles are "0.2" and/or "1.0"')
    if not chosen:
        raise ValueError("serve at least one profile")
    return frozenset(chosen)


def _check_issuer(issuer: str) -> str:
    parts = urlsplit(issuer)
    secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in _LOOPBACK)
    if not secure or not parts.hostname or parts.query or parts.fragment or issuer.endswith("/"):
        raise ValueError("issuer must be your Frontdoor issuer URL (https, no trailing slash)")
    return issuer


class _Refused(Exception):
    def __init__(self, error: ProtocolError, retry_after: str | None = None) -> None:
        super().__init__(error.code.value)
        self.error = error
        self.retry_after = retry_after


class FrontdoorVerifier:
    """Verifies requests to your API and MCP server against your Frontdoor issuer.

    Create one per issuer at start-up and share it: it holds the key cache, the replay
    cache and (unless injected) an HTTP client; close it with :meth:`aclose`.

    Args:
        issuer: Your issuer identifier, e.g. ``https://auth.frontdoor.example/shop-a``.
        credential: Your resource-server credential (``fdrs_...``), from the console.
        http: The HTTP client for the JWKS and introspection; one is created if omitted.
            Inject one to route it elsewhere (tests, the conformance harness, a proxy).
            Without one, the per-request calls (introspection, 1.0 ``session-state``) go
            through the sdk's own lean HTTP/1.1 connection pool (unless an environment
            proxy applies to the issuer), the rest through an ``httpx.AsyncClient``.
        clock: The time source (timezone-aware ``datetime``); the system clock if omitted.
        state_cache_ttl: Seconds to reuse Frontdoor's answer about a Session. ``0`` (the
            default) asks on every request, so a sign-out applies to the next request;
            see :mod:`frontdoor_sdk.state_cache` for the trade-off.
        jwks_min_refresh: Least seconds between two JWKS fetches for unknown ``kid`` values.
        replay_cache: Where proof ``jti`` values are remembered; in-process if omitted.
            Share one (e.g. Redis) across replicas.
        dpop_nonces: Issue and require DPoP nonces (RFC 9449 §9); off if omitted.
        timeout: Seconds a JWKS fetch or an introspection may take.
        profiles: The PAP versions served: ``"0.2"`` (Session Tokens) and/or ``"1.0"``
            (``Poppy-Session`` JWTs). Both by default; serve what your tenant serves.
        resource_metadata_url: Your ``https://{domain}/.well-known/oauth-protected-resource``
            for the 1.0 sign-in challenge; derived from the request's origin if omitted.
        session_max_age: Seconds a 1.0 Session JWT's ``iat`` may differ from now (±).
        agent_keys_min_refresh: Least seconds between two reloads of one agent's keys
            after a delegation named an unknown ``kid``.
        max_agents: The most agents whose identity keys are cached (LRU).
        allow_http_loopback: Accept ``http://`` loopback agents and URLs in 1.0 (dev only).
        shared_signals: Keep Session state in memory from Frontdoor's Shared Signals
            stream (ADR 0005): 0.2 Sessions and 1.0 ``session-state`` answers, no round trip
            per request while the stream is live, the same "next request is refused"
            guarantee (docs/sdk.md). With several replicas and 1.0, use a shared
            ``replay_cache``: a 1.0 request answered from memory claims its Session JWT's
            ``jti`` only there, not at Frontdoor. The stream runs from
            :meth:`start` (or ``async with``) to :meth:`aclose`.
        max_sessions: The most Sessions held in memory by the stream (LRU).
    """

    def __init__(
        self,
        issuer: str,
        credential: str,
        *,
        http: httpx.AsyncClient | None = None,
        clock: Clock | None = None,
        state_cache_ttl: float = 0,
        jwks_min_refresh: float = 30,
        replay_cache: ReplayCache | None = None,
        dpop_nonces: DPoPNonces | None = None,
        timeout: float = 5.0,
        profiles: Collection[str] = ALL_PROFILES,
        resource_metadata_url: str | None = None,
        session_max_age: int = DEFAULT_SESSION_MAX_AGE,
        agent_keys_min_refresh: float = 30,
        max_agents: int = 1000,
        allow_http_loopback: bool = False,
        shared_signals: bool = False,
        max_sessions: int = 10_000,
    ) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        self._issuer = _check_issuer(issuer)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        # The calls made on every request skip httpx's per-call cost (~2 ms CPU) when the
        # verifier owns its client; an injected client (proxy, mTLS, MockTransport) is used as is.
        self._lean = LeanClient() if self._owns_http and lean_supports(issuer) else None
        per_request = self._lean if self._lean is not None else self._http
        self._clock = clock or utc_now
        self._jwks = JwksCache(
            f"{issuer}/jwks.json", self._http, self._clock, min_refresh=jwks_min_refresh, timeout=timeout
        )
        self._introspector = Introspector(f"{issuer}/oauth/introspect", credential, per_request, timeout=timeout)
        self._states = StateCache(state_cache_ttl, self._clock)
        # A Session Token's signature is verified once per JWKS fetch, not on every request
        # of its Session; its claims and the request's DPoP proof are checked every time.
        self._signatures = VerifiedSignatures()
        self._signals = (SessionSignals(self._issuer, credential, self._http, self._jwks, self._clock,
                                        max_sessions=max_sessions) if shared_signals else None)
        self._replays: ReplayCache = (
            replay_cache if replay_cache is not None else InMemoryReplayCache(clock=self._clock)
        )
        self._nonces = dpop_nonces
        self._profiles = _check_profiles(profiles)
        self._loopback = allow_http_loopback
        if resource_metadata_url is not None:
            protected_resource_metadata_url(resource_metadata_url)  # validates: absolute, no query
        self._resource_metadata_url = resource_metadata_url
        self._delegated = DelegatedPath(
            issuer=self._issuer,
            agent_keys=AgentKeysCache(
                f"{issuer}/poppy/agent-keys",
                credential,
                self._http,
                self._clock,
                min_refresh=agent_keys_min_refresh,
                max_clients=max_agents,
                timeout=timeout,
            ),
            issuer_keys=self._jwks,
            states=SessionStateClient(f"{issuer}/poppy/session-state", credential, per_request,
                                      timeout=timeout),
            replays=self._replays,
            clock=self._clock,
            session_max_age=session_max_age,
            allow_http_loopback=allow_http_loopback,
            signals=self._signals,
        )

    def __repr__(self) -> str:
        return f"FrontdoorVerifier({self._issuer!r})"  # Never the credential.

    @property
    def issuer(self) -> str:
        """The issuer identifier tokens must come from."""
        return self._issuer

    @property
    def profiles(self) -> frozenset[Literal["0.2", "1.0"]]:
        """The PAP versions this verifier accepts."""
        return self._profiles

    @property
    def signals(self) -> SessionSignals | None:
        """The Shared Signals receiver, when ``shared_signals`` is on."""
        return self._signals

    def start(self) -> None:
        """Start the Shared Signals stream (with ``shared_signals``); call it in the event loop."""
        if self._signals is not None:
            self._signals.start()

    async def aclose(self) -> None:
        """Stop the stream and close the HTTP clients if the verifier created them."""
        if self._signals is not None:
            await self._signals.aclose()
        if self._lean is not None:
            await self._lean.aclose()
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> FrontdoorVerifier:
        self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def verify(
        self,
        method: str,
        url: str,
        headers: RequestHeaders,
        *,
        required_scopes: Iterable[str] = (),
        resource_url: str | None = None,
        mcp_dpop: bool = True,
    ) -> Caller | Refusal:
        """Verify one request to a protected endpoint.

        Args:
            method: The request method, e.g. ``"GET"``.
            url: The full URL the agent addressed, query included: your *public* scheme,
                host and path, not the address a proxy forwarded to (the DPoP proof is
                bound to it).
            headers: The request headers, repeats kept (pairs, a multi-map, or a mapping).
            required_scopes: Scopes the endpoint needs, all of them. Empty: any live
                Session, signed in or not.
            resource_url: Your MCP server's ``url`` when this endpoint is that server; it
                then takes only tokens issued for that URL (PAP-6-05).
            mcp_dpop: Whether that MCP server takes DPoP (shapes its challenges).

        Returns:
            The :class:`Caller`, or the :class:`Refusal` to send as is.
        """
        if "1.0" in self._profiles:
            try:
                session_header = poppy_session_value(headers)
            except ProtocolError as error:
                return self._delegated_refusal(error, url, headers, resource_url, None)
            if session_header is not None or "0.2" not in self._profiles:
                return await self._verify_delegated(method, url, headers, tuple(required_scopes), resource_url)
        try:
            return await self._verify(method, url, headers, tuple(required_scopes), resource_url)
        except _Refused as refused:
            return self._refusal(refused.error, resource_url, mcp_dpop, refused.retry_after)
        except ProtocolError as error:
            return self._refusal(error, resource_url, mcp_dpop, None)

    async def _verify_delegated(
        self, method: str, url: str, headers: RequestHeaders, required_scopes: Sequence[str], resource_url: str | None
    ) -> Caller | Refusal:
        try:
            if poppy_session_value(headers) is None:
                raise ProtocolError(ErrorCode.INVALID_SESSION, "this resource needs a Poppy-Session header")
            try:
                request = parse_delegated_request(headers=headers, url=url, allow_http_loopback=self._loopback,
                                                  delegations=self._delegated.delegations)
            except ValueError:
                raise ProtocolError(ErrorCode.INVALID_SESSION, "the request URL is not valid") from None
            return await self._delegated.verify(
                method, url, headers, request, required_scopes=required_scopes,
                audiences=self._audiences(url, resource_url),
            )
        except DelegatedRefused as refused:
            return self._delegated_refusal(refused.error, url, headers, resource_url, refused.retry_after)
        except ProtocolError as error:
            return self._delegated_refusal(error, url, headers, resource_url, None)

    def _audiences(self, url: str, resource_url: str | None) -> tuple[str, ...]:
        """Whom a 1.0 access token may be for here: the issuer (the default ``aud``), this
        origin, and the MCP server's ``url`` at that server (RFC 8707; ADR 0004 §4)."""
        audiences = [self._issuer]
        with contextlib.suppress(ValueError):  # a bad URL fails the Session check anyway
            audiences.append(resource_origin(url))
        if resource_url is not None:
            audiences.append(resource_url)
        return tuple(dict.fromkeys(audiences))

    def _delegated_refusal(
        self,
        error: ProtocolError,
        url: str,
        headers: RequestHeaders,
        resource_url: str | None,
        retry_after: str | None,
    ) -> Refusal:
        return delegated_refusal(
            error,
            resource_metadata=self._metadata_url(url, resource_url),
            scheme=_scheme_of(headers),
            retry_after=retry_after,
            algs=_ALGS,
        )

    def _metadata_url(self, url: str, resource_url: str | None) -> str:
        if resource_url is not None:
            return protected_resource_metadata_url(resource_url)
        if self._resource_metadata_url is not None:
            return self._resource_metadata_url
        try:
            return protected_resource_metadata_url(resource_origin(url))
        except ValueError:
            return protected_resource_metadata_url(resource_origin(self._issuer))

    def _refusal(
        self, error: ProtocolError, resource_url: str | None, mcp_dpop: bool, retry_after: str | None
    ) -> Refusal:
        nonce = self._nonces.current() if self._nonces is not None else None
        if error.code is ErrorCode.USE_DPOP_NONCE and nonce is None:
            error = ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "DPoP proof nonce is not one this resource issued")
        return refusal(
            error, resource_url=resource_url, mcp_dpop=mcp_dpop, dpop_nonce=nonce, retry_after=retry_after, algs=_ALGS
        )

    async def _verify(
        self,
        method: str,
        url: str,
        headers: RequestHeaders,
        required_scopes: Sequence[str],
        resource_url: str | None,
    ) -> Caller:
        try:
            keys = await self._jwks.keys()
        except JwksUnavailable:
            # No credential needs no key: the bare challenge (RFC 6750 §3.1, RFC 9449 §7.1),
            # not 503, so an agent learns to authenticate while the issuer is unreachable.
            authorization_credential(headers)  # raises MissingToken without one
            raise _Refused(_unavailable("the issuer's keys are unavailable")) from None
        try:
            verified = self._check(method, url, headers, keys, resource_url)
        except UnknownKeyId:
            try:
                fresh = await self._jwks.refresh_for_unknown_kid()
            except JwksUnavailable:
                raise _Refused(_unavailable("the issuer's keys are unavailable")) from None
            if fresh is None:
                raise
            verified = self._check(method, url, headers, fresh, resource_url)
        if verified.proof is not None:
            proof = verified.proof
            if not await self._replays.first_use(f"{proof.jkt}.{proof.jti}", until=proof.accept_until):
                raise ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "DPoP proof was already used")
        _, token = authorization_credential(headers)
        state = await self._state(verified.claims, token)
        caller = Caller(
            client_id=verified.claims.client_id,
            user_id=verified.claims.sub,
            session_id=verified.claims.sid,
            signed_in=state.signed_in,
            account=state.account if state.signed_in else None,
            scopes=_scopes(state),
            token_type="DPoP" if verified.scheme is ChallengeScheme.DPOP else "Bearer",
        )
        missing = check_scopes(caller, required_scopes)
        if missing is not None:
            raise missing
        return caller

    def _check(
        self, method: str, url: str, headers: RequestHeaders, keys: KeySet, resource_url: str | None
    ) -> VerifiedCaller:
        accepted = self._nonces.accepted() if self._nonces is not None else None
        try:
            return verify_resource_request(
                method=method,
                url=url,
                headers=headers,
                keys=keys,
                issuer=self._issuer,
                now=int(epoch_seconds(self._clock)),
                resource_url=resource_url,
                dpop_nonce=accepted,
                require_nonce=bool(accepted),
                allowed_algs=_ALGS,
                signatures=self._signatures,
            )
        except ValueError:
            # A request URL that is not an absolute http(s) URL (e.g. a bad Host header).
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "the request URL is not valid") from None

    async def _state(self, claims: SessionTokenClaims, token: str) -> SessionState:
        signals = self._signals
        mark = 0
        if signals is not None:
            held = signals.lookup(claims.sid)
            if held is not None and held.client_id == claims.client_id and held.sub == claims.sub:
                # Signature, expiry, binding and audience were verified locally just now; the
                # Session's own state is what the live stream keeps true (ADR 0005).
                return SessionState(active=True, iss=claims.iss, client_id=claims.client_id, sub=claims.sub,
                                    sid=claims.sid, signed_in=held.signed_in, account=held.account, scope=held.scope)
            mark = signals.mark()
        state = self._states.get(claims.jti)
        if state is None:
            try:
                state = await self._introspector.introspect(token)
            except IntrospectionUnavailable as down:
                raise _Refused(_unavailable("the Session's state is unavailable"), down.retry_after) from None
            except IntrospectionRefused:
                raise _Refused(ProtocolError(ErrorCode.SERVER_ERROR, "the resource is misconfigured")) from None
            self._states.put(claims.jti, state)
        if not state.active:
            raise ProtocolError(ErrorCode.INVALID_TOKEN, "the Session Token is no longer active")
        if not _describes(state, claims):
            raise ProtocolError(ErrorCode.INVALID_TOKEN, "the Session Token is not the one introspected")
        if signals is not None:
            signals.remember(claims.sid, state, mark)
        return state


def _scheme_of(headers: RequestHeaders) -> ChallengeScheme | None:
    """The scheme of the request's ``Authorization``, for the scheme of a 1.0 challenge."""
    values = header_values(headers, "authorization")
    if len(values) != 1:
        return None
    name = values[0].strip(" \t").partition(" ")[0].lower()
    return ChallengeScheme.DPOP if name == "dpop" else ChallengeScheme.BEARER if name == "bearer" else None


def _unavailable(description: str) -> ProtocolError:
    return ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE, description)


def _describes(state: SessionState, claims: SessionTokenClaims) -> bool:
    """Whether Frontdoor's answer is about this token: a mismatch fails closed."""
    same = (
        state.iss == claims.iss
        and state.client_id == claims.client_id
        and state.sub == claims.sub
        and state.sid == claims.sid
    )
    if state.cnf is not None and state.cnf.jkt != claims.jkt:
        return False
    if state.token_type is not None and (state.token_type == "DPoP") != (claims.cnf is not None):
        return False
    return same and (state.resource is None or state.resource == claims.resource)


def _scopes(state: SessionState) -> frozenset[str]:
    if not state.signed_in or not state.scope:
        return frozenset()
    try:
        return frozenset(parse_scope(state.scope))
    except ValueError:
        return frozenset()
