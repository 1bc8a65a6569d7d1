"""The client assertion: how an agent authenticates at the token endpoint (PAP §4.1).

``private_key_jwt`` (RFC 7523 §2.2, §3; OpenID Connect Core §9): a JWT signed with a key
from the agent's verified ``jwks_uri``, with ``iss`` and ``sub`` both the ``client_id``,
``aud`` the company's ``auth.issuer`` as one string (PAP-4.1-04, PAP-4.1-05: any other
value, the token endpoint URL included, is refused), a short lifetime and a ``jti``. Every
refusal is ``invalid_client``. Replay of the ``jti`` is checked by the caller, which
stores it until ``exp`` plus the skew.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.errors import ErrorCode
from frontdoor_protocol.jwt_assertion import (
    DEFAULT_ASSERTION_ALGORITHMS,
    DEFAULT_CLOCK_SKEW,
    MAX_ASSERTION_LIFETIME,
    verify_jwt_assertion,
)

__all__ = ["CLIENT_ASSERTION_TYPES", "ClientAssertion", "verify_client_assertion"]

CLIENT_ASSERTION_TYPES = frozenset({"jwt", "client-authentication+jwt"})
"""Accepted ``typ`` values besides none: ``JWT`` (RFC 7519 §5.1) and the explicit type of
draft-ietf-oauth-rfc7523bis. A browser assertion or a DPoP proof is never one."""


class ClientAssertion(msgspec.Struct, frozen=True, kw_only=True):
    """A verified client assertion.

    Attributes:
        jti: Its ``jti``: the caller refuses one already seen from this client until
            ``exp`` plus the skew.
        exp: ``exp``, whole seconds.
        iat: ``iat``, whole seconds.
        kid: The ``kid`` of the key that signed it.
    """

    jti: str
    exp: int
    iat: int
    kid: str | None


def verify_client_assertion(
    assertion: str,
    *,
    client_id: str,
    issuer: str,
    keys: KeySet,
    now: int,
    max_lifetime: int = MAX_ASSERTION_LIFETIME,
    skew: int = DEFAULT_CLOCK_SKEW,
    algorithms: Collection[str] = DEFAULT_ASSERTION_ALGORITHMS,
) -> ClientAssertion:
    """Verify a ``client_assertion`` (PAP-4.1-05, RFC 7523 §3, GUIDE-jwt-02..04).

    Args:
        assertion: The ``client_assertion`` form value.
        client_id: The client being authenticated: ``iss`` and ``sub`` must equal it.
        issuer: The tenant's ``auth.issuer``, which ``aud`` must equal exactly (in
            general ``profile.assertion_audience_for(...)``: the issuer in profile 0.2).
        keys: Keys from the client's verified ``jwks_uri``.
        now: The current time, in seconds since the epoch.
        max_lifetime: Most seconds from ``iat`` to ``exp``.
        skew: Seconds of clock difference tolerated.
        algorithms: Accepted ``alg`` values (the metadata's
            ``token_endpoint_auth_signing_alg_values_supported``).

    Returns:
        The assertion's ``jti``, times and key.

    Raises:
        UnknownKeyId: ``invalid_client``, no key has its ``kid``: refetch the JWKS once.
        ProtocolError: ``invalid_client`` for any other failed check.
        ValueError: For an empty ``client_id`` or ``issuer`` or a bad parameter.
    """
    if not client_id or not issuer:
        raise ValueError("client_id and issuer are required")
    verified = verify_jwt_assertion(
        assertion,
        code=ErrorCode.INVALID_CLIENT,
        name="client assertion",
        expected_iss=client_id,
        audience=issuer,
        subject_ok=lambda subject: subject == client_id,
        keys=keys,
        now=now,
        algorithms=algorithms,
        types=CLIENT_ASSERTION_TYPES,
        max_lifetime=max_lifetime,
        skew=skew,
    )
    return ClientAssertion(jti=verified.jti, exp=verified.exp, iat=verified.iat, kid=verified.kid)
