"""The Session assertion: the jwt-bearer grant that starts or renews a Session (PAP §4.2).

The agent signs, with a key from its verified ``jwks_uri``: ``iss`` its ``client_id``,
``sub`` the User ID it chose for this user at this company (pairwise, PAP-4.2-01), ``aud``
the company's ``auth.issuer`` as one string (PAP-4.2-07), ``exp`` at most five minutes
after ``iat`` (PAP-4.2-08) and a ``jti`` that the caller refuses to accept twice from the
same ``client_id`` while it is valid (PAP-4.2-09). Every refusal is ``invalid_grant``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.errors import ErrorCode
from frontdoor_protocol.jwt_assertion import (
    DEFAULT_ASSERTION_ALGORITHMS,
    DEFAULT_CLOCK_SKEW,
    MAX_ASSERTION_LIFETIME,
    verify_jwt_assertion,
)

__all__ = [
    "MAX_USER_ID_LENGTH",
    "SESSION_ASSERTION_TYPES",
    "SessionAssertion",
    "is_user_id",
    "verify_session_assertion",
]

MAX_USER_ID_LENGTH: Final = 256
"""Longest User ID accepted; the peer SDK's are about 26 characters."""
SESSION_ASSERTION_TYPES: Final = frozenset({"jwt"})
"""Accepted ``typ`` values besides none: a browser assertion (``poppy-browser+jwt``) is
refused here (PAP-5-05), as is a DPoP proof."""

_USER_ID: Final = re.compile(r"[\x21-\x7e]+")


def is_user_id(value: object) -> bool:
    """Whether ``value`` is an acceptable User ID (``sub`` of a Session assertion).

    The protocol leaves the format to the agent (PAP-4.2-01); Frontdoor stores it, keys
    Sessions by it and shows it to the company, so it must be plain: 1 to
    :data:`MAX_USER_ID_LENGTH` visible ASCII characters, no spaces or controls.

    Args:
        value: The decoded ``sub`` claim.

    Returns:
        ``True`` when acceptable.
    """
    return isinstance(value, str) and len(value) <= MAX_USER_ID_LENGTH and _USER_ID.fullmatch(value) is not None


class SessionAssertion(msgspec.Struct, frozen=True, kw_only=True):
    """A verified Session assertion.

    Attributes:
        user_id: ``sub``: the agent's pairwise User ID for this user at this company.
        jti: Its ``jti``: the caller refuses one already seen from this ``client_id``
            until ``exp`` plus the skew (PAP-4.2-09).
        exp: ``exp``, whole seconds.
        iat: ``iat``, whole seconds.
        kid: The ``kid`` of the key that signed it.
    """

    user_id: str
    jti: str
    exp: int
    iat: int
    kid: str | None


def verify_session_assertion(
    assertion: str,
    *,
    client_id: str,
    issuer: str,
    keys: KeySet,
    now: int,
    max_lifetime: int = MAX_ASSERTION_LIFETIME,
    skew: int = DEFAULT_CLOCK_SKEW,
    algorithms: Collection[str] = DEFAULT_ASSERTION_ALGORITHMS,
) -> SessionAssertion:
    """Verify the ``assertion`` of a jwt-bearer token request (PAP-4.2-07, PAP-4.2-08).

    Replay is not checked here: the caller stores ``(client_id, jti)`` atomically, shared
    by every replica, until ``exp + skew`` (PAP-4.2-09).

    Args:
        assertion: The ``assertion`` form value.
        client_id: The authenticated client: ``iss`` must equal it.
        issuer: The tenant's ``auth.issuer``, which ``aud`` must equal exactly (in
            general ``profile.assertion_audience_for(...)``: the issuer in profile 0.2).
        keys: Keys from the client's verified ``jwks_uri``.
        now: The current time, in seconds since the epoch.
        max_lifetime: Most seconds from ``iat`` to ``exp``; at most 300 (PAP-4.2-08).
        skew: Seconds of clock difference tolerated.
        algorithms: Accepted ``alg`` values.

    Returns:
        The User ID, ``jti``, times and key.

    Raises:
        UnknownKeyId: ``invalid_grant``, no key has its ``kid``: refetch the JWKS once.
        ProtocolError: ``invalid_grant`` for any other failed check.
        ValueError: For an empty ``client_id`` or ``issuer``, ``max_lifetime`` above 300,
            or a bad parameter.
    """
    if not client_id or not issuer:
        raise ValueError("client_id and issuer are required")
    if max_lifetime > MAX_ASSERTION_LIFETIME:
        raise ValueError("a Session assertion lives at most 300 seconds (PAP-4.2-08)")
    verified = verify_jwt_assertion(
        assertion,
        code=ErrorCode.INVALID_GRANT,
        name="session assertion",
        expected_iss=client_id,
        audience=issuer,
        subject_ok=is_user_id,
        keys=keys,
        now=now,
        algorithms=algorithms,
        types=SESSION_ASSERTION_TYPES,
        max_lifetime=max_lifetime,
        skew=skew,
    )
    return SessionAssertion(
        user_id=verified.subject, jti=verified.jti, exp=verified.exp, iat=verified.iat, kid=verified.kid
    )
