"""A PAP 1.0 request at one of Frontdoor's own endpoints: verified and observed (ADR 0004 §3, §5, §7).

The use case every Frontdoor surface that takes a ``Poppy-Session`` header runs, in the
order of [S §3]: the agent's identity keys (its CIMD and JWKS through
`frontdoor_identity.DelegatedKeyDirectory`, after the tenant's agent policy), the pure
checks of :func:`frontdoor_protocol.verify_delegated_request` (delegation, Session JWT,
an access token of the same client bound by ``ath``, its DPoP proof when bound), the
Session JWT's ``jti`` claimed once (and a bound token's proof), then the Session at
(tenant, ``client_id``, ``sid``) observed: created signed out at first sight, or checked for
the same ``sub`` and ``agent_id``, and the access token's grant family still live.

Failures are :class:`DelegatedRefusal` (the protocol error to answer, and the scheme the
token came with so a challenge can name it) or `Unavailable` (503 with ``Retry-After``):
the edge renders them (ADR 0004 §7).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg
import msgspec
from frontdoor_core.errors import Unavailable
from frontdoor_identity import (
    AgentKeys,
    ClientResolutionError,
    DelegatedKeyDirectory,
    InvalidClientMetadata,
    get_agent_policy,
    is_allowed,
)
from frontdoor_protocol import (
    AccessTokenClaims,
    DelegatedSession,
    DelegationCache,
    ErrorCode,
    ProtocolError,
    UnknownAgentKeyId,
    UnknownKeyId,
    parse_delegated_request,
    verify_delegated_request,
)
from joserfc.jwk import KeySet

from .delegated_sessions import DelegatedState, observe_delegated_session, session_jti_claim
from .new_session_admission import Admission, NewSessionRefused
from .replay_cache import ReplayCache
from .signer_cache import IssuerKeys

__all__ = ["AgentRefused", "DelegatedCallers", "DelegatedRefusal", "VerifiedDelegatedCaller", "accepted_agent_keys"]

_KEYS_RETRY_AFTER = 30


class AgentRefused(Exception):
    """The tenant's agent policy does not accept the agent."""


async def accepted_agent_keys(pool: asyncpg.Pool, directory: DelegatedKeyDirectory, tenant_id: str, client_id: str,
                              *, refresh: bool = False) -> AgentKeys:
    """The agent's identity keys under the 1.0 rules, once the tenant's agent policy accepts it (ADR 0004 §6).

    The step both the resources' verification and the sdk's ``POST {issuer}/poppy/agent-keys``
    run. The pool connection is released before the agent's documents are fetched.

    Raises:
        AgentRefused: The tenant's agent policy refuses the agent.
        InvalidClientMetadata: Its documents break the 1.0 rules (a redirect, another
            ``client_id``, a ``jwks_uri`` elsewhere...).
        ClientResolutionError: Its keys cannot be loaded now.
    """
    async with pool.acquire() as conn:
        policy = await get_agent_policy(conn, tenant_id, client_id=client_id)
    if not is_allowed(policy, client_id):
        raise AgentRefused(client_id)
    return await directory.get_keys(client_id, refresh=refresh)


class DelegatedRefusal(Exception):
    """The request is refused with ``error``; ``scheme`` is the access token's (``None`` signed out)."""

    def __init__(self, error: ProtocolError, *, scheme: str | None = None) -> None:
        super().__init__(error.code.value)
        self.error = error
        self.scheme = scheme


class VerifiedDelegatedCaller(msgspec.Struct, frozen=True, kw_only=True):
    """A verified 1.0 request whose Session is ``active``.

    Attributes:
        session: The verified Session JWT's claims.
        token: The verified access token, when one was sent; its sign-in is live.
        state: Frontdoor's Session (``ses_`` ID, signed in, account and scope of the sign-in).
        scheme: ``Bearer`` or ``DPoP`` as the token came, else ``None``.
    """

    session: DelegatedSession
    token: AccessTokenClaims | None
    state: DelegatedState
    scheme: str | None = None


def _session_error(code: ErrorCode = ErrorCode.INVALID_SESSION) -> DelegatedRefusal:
    text = "The Session has ended: start a new one." if code == ErrorCode.SESSION_ENDED \
        else "The Poppy-Session header is not valid."
    return DelegatedRefusal(ProtocolError(code, text))


class DelegatedCallers:
    """Verifies 1.0 requests for one Frontdoor service; one instance per process.

    Args:
        pool: The database.
        issuer_keys: The tenants' signing keys (access tokens are verified against them).
        agent_keys: The agents' identity keys under the 1.0 rules.
        replay: The replay cache shared by every replica.
        dpop_namespace: The replay namespace of this service's DPoP proofs.
        dev: Development: ``http://`` loopback URLs are tolerated.
        delegations: The process's verified delegations (ADR 0004 §3 step 4), when the service
            keeps them: a delegation is then parsed and verified once, and only its ``kid``,
            ``iss`` and times are checked again (keyed by its exact string and the identity key
            that verified it, so a rotated agent key misses).
        admission: Whether the tenant may start new Sessions now (billing); when it may not,
            a Session seen for the first time is refused (`NewSessionRefused`), known ones go on.
    """

    def __init__(self, *, pool: asyncpg.Pool, issuer_keys: IssuerKeys, agent_keys: DelegatedKeyDirectory,
                 replay: ReplayCache, dpop_namespace: str, dev: bool = False,
                 delegations: DelegationCache | None = None, admission: Admission | None = None) -> None:
        self._admission = admission
        self._pool = pool
        self._issuer_keys = issuer_keys
        self._agent_keys = agent_keys
        self._replay = replay
        self._dpop_namespace = dpop_namespace
        self._dev = dev
        self._delegations = delegations

    async def _identity_keys(self, tenant_id: str, client_id: str, *, refresh: bool = False) -> KeySet:
        try:
            loaded = await accepted_agent_keys(self._pool, self._agent_keys, tenant_id, client_id, refresh=refresh)
        except (AgentRefused, InvalidClientMetadata):
            raise _session_error() from None
        except ClientResolutionError:
            raise Unavailable("agent_keys_unavailable", "The agent's keys cannot be loaded; retry shortly.",
                              retry_after=_KEYS_RETRY_AFTER) from None
        keys: KeySet = loaded.keys
        return keys

    async def verify(self, tenant_id: str, issuer: str, *, method: str, url: str,
                     headers: Sequence[tuple[str, str]], now: datetime) -> VerifiedDelegatedCaller:
        """Verify the request and observe its Session.

        Args:
            tenant_id: The tenant.
            issuer: Its issuer: the Session JWT's ``aud`` and the access token's ``iss``.
            method: The request method (``htm``).
            url: The request URL as the agent addressed it (``htu``).
            headers: All request headers, repeated ones kept.
            now: The time.

        Raises:
            DelegatedRefusal: ``invalid_session``, ``session_ended``, ``invalid_token``,
                ``invalid_dpop_proof``...
            Unavailable: The agent's keys or the replay cache cannot answer now.
            NewSessionRefused: The Session would be new and the tenant may not start one now.
        """
        epoch = int(now.timestamp())
        try:
            delegated = parse_delegated_request(headers=headers, url=url, allow_http_loopback=self._dev,
                                                delegations=self._delegations)
        except ProtocolError as error:
            raise DelegatedRefusal(error) from None
        scheme = delegated.scheme.value if delegated.scheme is not None else None
        client_id = delegated.session.client_id
        agent_keys = await self._identity_keys(tenant_id, client_id)
        async with self._pool.acquire() as conn:
            issuer_keys = await self._issuer_keys.keyset(conn, tenant_id, now)
            reloaded_agent = reloaded_issuer = False
            while True:
                try:
                    verified = verify_delegated_request(
                        delegated, method=method, url=url, identity_keys=agent_keys, issuer_keys=issuer_keys,
                        issuer=issuer, now=epoch, allow_http_loopback=self._dev, delegations=self._delegations)
                    break
                except UnknownAgentKeyId:
                    if reloaded_agent:  # an unknown delegation kid: the agent's keys are reloaded once
                        raise _session_error() from None
                    reloaded_agent = True
                    agent_keys = await self._identity_keys(tenant_id, client_id, refresh=True)
                except UnknownKeyId:
                    if reloaded_issuer:
                        raise DelegatedRefusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The access token is not valid."),
                                               scheme=scheme) from None
                    reloaded_issuer = True
                    issuer_keys = await self._issuer_keys.keyset(conn, tenant_id, now, refresh=True)
                except ProtocolError as error:
                    raise DelegatedRefusal(error, scheme=scheme) from None
                except ValueError:  # a request URL no htu can match (control characters)
                    raise _session_error() from None
            session, token = verified.session, verified.token
            # ADR 0004 §3 [Q12]: a Session JWT is used once; a bound token's proof too (RFC 9449 §11.1).
            # Both claimed in one round trip; a request with either one seen before is refused.
            claims = [session_jti_claim(tenant_id=tenant_id, client_id=session.client_id, jti=session.jti,
                                        iat=session.iat, now=epoch)]
            if verified.proof is not None:
                proof = verified.proof
                claims.append((self._dpop_namespace, f"{tenant_id}:{proof.jkt}", proof.jti,
                               max(int(proof.accept_until - epoch), 1)))
            fresh = all(await self._replay.claim_all(claims))
            if not fresh:
                raise _session_error()
            refused = await self._admission(tenant_id) if self._admission is not None else None
            try:
                state = await observe_delegated_session(conn, tenant_id, client_id=session.client_id, sid=session.sid,
                                                        sub=session.sub, agent_id=session.agent_id, now=now,
                                                        sgn=token.sgn if token is not None else None,
                                                        create=refused is None)
            except LookupError:
                if refused is None:
                    raise
                raise NewSessionRefused(refused) from None
        if state.state == "ended":
            raise _session_error(ErrorCode.SESSION_ENDED)
        if state.state != "active":
            raise _session_error()
        if token is not None and not state.signed_in:
            # The sign-in was revoked or disconnected: its tokens are dead, the Session lives on (ADR 0004 §5).
            raise DelegatedRefusal(ProtocolError(ErrorCode.INVALID_TOKEN, "The access token is not valid."),
                                   scheme=scheme)
        return VerifiedDelegatedCaller(session=session, token=token, state=state, scheme=scheme)
