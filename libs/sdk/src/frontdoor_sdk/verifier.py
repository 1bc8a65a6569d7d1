"""One call that decides a protected request: who is calling, or the refusal to send.

Order, cheapest and most local first:

1. The stateless checks of PAP §4.3 (:func:`frontdoor_protocol.verify_resource_request`):
   no token in the URL, one ``Authorization``, the Session Token's signature and claims
   against the issuer's cached JWKS (an unknown ``kid`` refetches it, at most once per
   ``jwks_min_refresh`` seconds), the scheme, the DPoP proof.
2. The proof's ``jti`` in the replay cache: a proof is accepted once (RFC 9449 §11.1).
3. The Session's state from Frontdoor's introspection (every request unless
   ``state_cache_ttl`` is set): an inactive token is ``invalid_token``.
4. The route's scopes: ``sign_in_required`` when signed out, else ``insufficient_scope``.

It fails closed: when the keys or the state cannot be had, the answer is 503 with
``Retry-After`` (500 if Frontdoor refuses the credential), never "allow". A request with
no credential at all still gets its 401 challenge then: that needs no key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import urlsplit

import httpx
from frontdoor_protocol import (
    REQUIRED_DPOP_ALGORITHM,
    ChallengeScheme,
    ErrorCode,
    ProtocolError,
    RequestHeaders,
    SessionTokenClaims,
    UnknownKeyId,
    VerifiedCaller,
    authorization_credential,
    parse_scope,
    verify_resource_request,
)
from joserfc.jwk import KeySet

from frontdoor_sdk.caller import Caller, check_scopes
from frontdoor_sdk.clock import Clock, epoch_seconds, utc_now
from frontdoor_sdk.dpop_nonces import DPoPNonces
from frontdoor_sdk.introspection import (
    IntrospectionRefused,
    IntrospectionUnavailable,
    Introspector,
    SessionState,
)
from frontdoor_sdk.jwks_cache import JwksCache, JwksUnavailable
from frontdoor_sdk.refusal import Refusal, refusal
from frontdoor_sdk.replay_cache import InMemoryReplayCache, ReplayCache
from frontdoor_sdk.state_cache import StateCache

__all__ = ["FrontdoorVerifier"]

_ALGS: Final = (REQUIRED_DPOP_ALGORITHM,)
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})


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
        clock: The time source (timezone-aware ``datetime``); the system clock if omitted.
        state_cache_ttl: Seconds to reuse Frontdoor's answer about a Session. ``0`` (the
            default) asks on every request, so a sign-out applies to the next request;
            see :mod:`frontdoor_sdk.state_cache` for the trade-off.
        jwks_min_refresh: Least seconds between two JWKS fetches for unknown ``kid`` values.
        replay_cache: Where proof ``jti`` values are remembered; in-process if omitted.
            Share one (e.g. Redis) across replicas.
        dpop_nonces: Issue and require DPoP nonces (RFC 9449 §9); off if omitted.
        timeout: Seconds a JWKS fetch or an introspection may take.
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
    ) -> None:
        if not credential:
            raise ValueError("credential is required: create a resource-server credential in the console")
        self._issuer = _check_issuer(issuer)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._clock = clock or utc_now
        self._jwks = JwksCache(
            f"{issuer}/jwks.json", self._http, self._clock, min_refresh=jwks_min_refresh, timeout=timeout
        )
        self._introspector = Introspector(f"{issuer}/oauth/introspect", credential, self._http, timeout=timeout)
        self._states = StateCache(state_cache_ttl, self._clock)
        self._replays: ReplayCache = (
            replay_cache if replay_cache is not None else InMemoryReplayCache(clock=self._clock)
        )
        self._nonces = dpop_nonces

    def __repr__(self) -> str:
        return f"FrontdoorVerifier({self._issuer!r})"  # Never the credential.

    @property
    def issuer(self) -> str:
        """The issuer identifier tokens must come from."""
        return self._issuer

    async def aclose(self) -> None:
        """Close the HTTP client if the verifier created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> FrontdoorVerifier:
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
        try:
            return await self._verify(method, url, headers, tuple(required_scopes), resource_url)
        except _Refused as refused:
            return self._refusal(refused.error, resource_url, mcp_dpop, refused.retry_after)
        except ProtocolError as error:
            return self._refusal(error, resource_url, mcp_dpop, None)

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
            )
        except ValueError:
            # A request URL that is not an absolute http(s) URL (e.g. a bad Host header).
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "the request URL is not valid") from None

    async def _state(self, claims: SessionTokenClaims, token: str) -> SessionState:
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
        return state


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
