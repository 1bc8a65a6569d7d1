"""Session Tokens: the issuer's signed access tokens, verified by the company sdk (PAP §4.2).

A JWT access token shaped as RFC 9068 says: header ``{"alg": "ES256", "typ": "at+jwt",
"kid"}``, claims ``iss``, ``sub`` (the User ID), ``aud``, ``client_id``, ``sid`` (the
Session), ``jti``, ``iat``, ``exp`` and ``token_use: "session"`` (so no other token the
issuer signs can pass for one). It carries nothing private (PAP-4.2-06 needs no
encryption): the Session's state, signed in or not, is looked up by ``sid``.

Two kinds:

- An ordinary Session Token: ``aud`` is the issuer, ``cnf.jkt`` binds it to the agent's
  DPoP key (RFC 9449 §6.1), accepted at the company's APIs and conversations.
- A token for one MCP server (PAP-4.3-09, RFC 8707): ``aud`` and ``resource`` are the
  server's ``url``. It is DPoP-bound when the server supports DPoP, else a Bearer token
  without ``cnf`` (PAP-4.3-10, PAP-4.3-23). Verified without ``audience`` (at any other
  endpoint) it is refused.

Verification is the issuer-token profile (:mod:`frontdoor_protocol.issuer_jwt`, lifetime
at most :data:`MAX_SESSION_TOKEN_LIFETIME`); ``aud`` and ``resource`` are checked after the
claims decode into :class:`SessionTokenClaims`. Every refusal is ``invalid_token``.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import sign_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.issuer_jwt import (
    ISSUER_JWT_ALGORITHM,
    ISSUER_JWT_TYPE,
    check_signing_key,
    decode_issuer_claims,
    verify_issuer_jws,
)
from frontdoor_protocol.jwt_assertion import DEFAULT_CLOCK_SKEW
from frontdoor_protocol.session_assertion import is_user_id
from frontdoor_protocol.verified_signatures import VerifiedSignatures

__all__ = [
    "MAX_SESSION_TOKEN_LIFETIME",
    "SESSION_TOKEN_ALGORITHM",
    "SESSION_TOKEN_TYPE",
    "TOKEN_USE_SESSION",
    "Confirmation",
    "SessionTokenClaims",
    "mint_session_token",
    "verify_session_token",
]

SESSION_TOKEN_TYPE: Final = ISSUER_JWT_TYPE
"""The ``typ`` of a Session Token (RFC 9068 §2.1)."""
SESSION_TOKEN_ALGORITHM: Final = ISSUER_JWT_ALGORITHM
"""The only algorithm the issuer signs Session Tokens with."""
TOKEN_USE_SESSION: Final = "session"
MAX_SESSION_TOKEN_LIFETIME: Final = 24 * 3600
"""Session Tokens last hours, not days (PAP-4.2-04)."""

_INVALID = ErrorCode.INVALID_TOKEN
_NAME = "session token"


class Confirmation(msgspec.Struct, frozen=True, kw_only=True):
    """The ``cnf`` claim (RFC 7800 §3.1) of a DPoP-bound token.

    Attributes:
        jkt: RFC 7638 thumbprint of the agent's DPoP key (RFC 9449 §6.1).
    """

    jkt: str


class SessionTokenClaims(msgspec.Struct, frozen=True, kw_only=True):
    """The claims of a Session Token.

    Attributes:
        iss: The issuer identifier.
        sub: The agent's User ID for the user (PAP §4.2).
        aud: The issuer, or the MCP server's ``url`` for a resource-bound token.
        client_id: The agent's ``client_id``.
        sid: The Session's ID.
        jti: This token's unique ID.
        iat: Issued at, seconds since the epoch.
        exp: Expiry, seconds since the epoch.
        cnf: The DPoP key binding; absent only on a Bearer MCP token.
        resource: The MCP server's ``url`` for a resource-bound token, else absent.
        token_use: Always ``"session"``.
    """

    iss: str
    sub: str
    aud: str
    client_id: str
    sid: str
    jti: str
    iat: int
    exp: int
    cnf: Confirmation | None = None
    resource: str | None = None
    token_use: Literal["session"] = "session"

    @property
    def jkt(self) -> str | None:
        """The bound key's thumbprint, or ``None`` for a Bearer token."""
        return None if self.cnf is None else self.cnf.jkt


class _Payload(SessionTokenClaims, frozen=True, kw_only=True):
    # On the wire ``token_use`` is required: a token without it is not a Session Token.
    token_use: Literal["session"]


def _check_mintable(claims: SessionTokenClaims) -> None:
    texts = (claims.iss, claims.aud, claims.client_id, claims.sid, claims.jti)
    if not all(texts) or not is_user_id(claims.sub):
        raise ValueError("iss, sub, aud, client_id, sid and jti must be non-empty")
    if not 0 < claims.exp - claims.iat <= MAX_SESSION_TOKEN_LIFETIME:
        raise ValueError("a Session Token lives between 1 second and 24 hours")
    if claims.cnf is not None and not claims.cnf.jkt:
        raise ValueError("cnf.jkt must be a key thumbprint")
    if claims.resource is None:
        if claims.aud != claims.iss or claims.cnf is None:
            raise ValueError("an ordinary Session Token has aud = iss and is DPoP-bound")
    elif claims.aud != claims.resource or claims.resource == claims.iss:
        raise ValueError("a resource-bound Session Token has aud = resource, not the issuer")


def mint_session_token(claims: SessionTokenClaims, key: ECKey, kid: str) -> str:
    """Sign a Session Token with the issuer's current key.

    Args:
        claims: The claims; ``token_use`` is always ``session``.
        key: The issuer's private P-256 key.
        kid: The key's ``kid`` as published in the issuer's JWKS.

    Returns:
        The compact JWT.

    Raises:
        ValueError: When the claims are inconsistent (see :class:`SessionTokenClaims`),
            the lifetime exceeds :data:`MAX_SESSION_TOKEN_LIFETIME`, or the key is not a
            private P-256 key.
    """
    _check_mintable(claims)
    check_signing_key(key, kid)
    header = {"alg": SESSION_TOKEN_ALGORITHM, "typ": SESSION_TOKEN_TYPE, "kid": kid}
    return sign_compact_jws(header, msgspec.structs.asdict(claims), key)


def verify_session_token(
    token: str,
    *,
    issuer: str,
    keys: KeySet,
    now: int,
    audience: str | None = None,
    skew: int = DEFAULT_CLOCK_SKEW,
    signatures: VerifiedSignatures | None = None,
) -> SessionTokenClaims:
    """Verify a Session Token presented at a resource (RFC 9068 §4, PAP-4.3-10).

    The caller then checks the scheme: a token with ``cnf`` needs the ``DPoP`` scheme and
    a proof whose key has that thumbprint (PAP-4.3-03, PAP-4.3-11); one without ``cnf`` is
    a Bearer token, accepted only at its MCP server.

    Args:
        token: The token from ``Authorization``.
        issuer: The tenant's issuer identifier; ``iss`` must equal it.
        keys: The issuer's signing keys (its JWKS).
        now: The current time, in seconds since the epoch.
        audience: ``None`` at the company's APIs and conversations (``aud`` must be the
            issuer and the token DPoP-bound); an MCP server's ``url`` there (``aud`` and
            ``resource`` must be that ``url``).
        skew: Seconds of clock difference tolerated on ``exp`` and ``iat``.
        signatures: Tokens whose signature already verified against ``keys``: the signature
            check is skipped for them, every other check is made (`VerifiedSignatures`).

    Returns:
        The token's claims.

    Raises:
        UnknownKeyId: ``invalid_token``, no key has its ``kid``: refetch the JWKS once.
        ProtocolError: ``invalid_token`` for any other failed check.
    """
    jws = signatures.get(token, keys) if signatures is not None else None
    if jws is None:
        jws = verify_issuer_jws(token, keys=keys, name=_NAME)
        if signatures is not None:
            signatures.put(token, keys, jws)
    claims = decode_issuer_claims(jws, _Payload, issuer=issuer, now=now, skew=skew, name=_NAME,
                                  max_lifetime=MAX_SESSION_TOKEN_LIFETIME)
    if audience is None or audience == issuer:
        if claims.aud != issuer or claims.resource is not None:
            raise ProtocolError(_INVALID, "session token is for another resource")
        if claims.cnf is None:
            raise ProtocolError(_INVALID, "session token is not DPoP-bound")
    elif claims.aud != audience or claims.resource != audience:
        raise ProtocolError(_INVALID, "session token is for another resource")
    return SessionTokenClaims(
        iss=claims.iss,
        sub=claims.sub,
        aud=claims.aud,
        client_id=claims.client_id,
        sid=claims.sid,
        jti=claims.jti,
        iat=claims.iat,
        exp=claims.exp,
        cnf=claims.cnf,
        resource=claims.resource,
    )
