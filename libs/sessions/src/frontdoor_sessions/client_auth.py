"""Client authentication for every agent-facing OAuth endpoint (PAP-4.1-05).

``private_key_jwt`` only: a ``client_assertion`` signed with a key from the agent's
verified metadata (an unknown ``kid`` refetches its JWKS once), ``aud`` the issuer.
Every failure is ``invalid_client``. The assertion's ``jti`` is returned as a
`OneTimeValue` for the caller to claim with its other one-time values in one round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from frontdoor_identity import AgentDirectory, ClientResolutionError, ResolvedClient
from frontdoor_protocol.client_assertion import ClientAssertion, verify_client_assertion
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.jws_verification import UnknownKeyId
from joserfc.jwk import KeySet
from joserfc.jws import extract_compact

from .token_endpoint import SKEW, OneTimeValue
from .token_request import CLIENT_ASSERTION_TYPE

__all__ = ["AuthenticatedClient", "authenticate_client", "verify_with_refresh"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AuthenticatedClient:
    """The agent that authenticated, with what is needed to finish the request."""

    client_id: str
    client: ResolvedClient
    assertion: ClientAssertion
    one_time: OneTimeValue


def _unverified_iss(assertion: str) -> str | None:
    try:
        claims = msgspec.json.decode(extract_compact(assertion.encode()).payload)
    except Exception:
        return None
    iss = claims.get("iss") if isinstance(claims, dict) else None
    return iss if isinstance(iss, str) else None


async def verify_with_refresh(directory: AgentDirectory, client: ResolvedClient, verify: Callable[[KeySet], T]) -> T:
    """Run ``verify`` with the client's keys; on an unknown ``kid``, once more with refetched keys."""
    try:
        return verify(client.keys)
    except UnknownKeyId:
        fresh = await directory.refresh_keys(client.metadata.client_id)
        if fresh is None:
            raise
        return verify(fresh)


async def authenticate_client(directory: AgentDirectory, *, tenant_id: str, issuer: str, client_id: str | None,
                              assertion_type: str | None, assertion: str | None, now: int) -> AuthenticatedClient:
    """Authenticate the caller; raise ``invalid_client`` for anything wrong.

    The ``client_id`` form parameter is optional (RFC 7523 §3): without it the client is
    the assertion's ``iss``, which is then verified like any other.
    """
    if assertion_type != CLIENT_ASSERTION_TYPE or not assertion:
        raise ProtocolError("invalid_client", "Authenticate with private_key_jwt (client_assertion).")
    cid = client_id or _unverified_iss(assertion)
    if not cid:
        raise ProtocolError("invalid_client", "The client assertion does not name a client.")
    try:
        client = await directory.get_client(cid)
    except ClientResolutionError:
        raise ProtocolError("invalid_client", "The client's metadata could not be used.") from None
    verified: Any = await verify_with_refresh(directory, client, lambda ks: verify_client_assertion(
        assertion, client_id=cid, issuer=issuer, keys=ks, now=now))
    one_time = OneTimeValue("client-assertion", f"{tenant_id}\x00{cid}", verified.jti, verified.exp - now + SKEW,
                            ProtocolError("invalid_client", "The client assertion was already used."))
    return AuthenticatedClient(client_id=cid, client=client, assertion=verified, one_time=one_time)
