"""The PAP 1.0 join assertion: the issuer's word that a browser joined a Session (ADR 0004 §8).

Frontdoor hosts steps 1 and 3 of the 1.0 browser join [S §6] and verifies step 2; at the
end it hands the company's join callback this short-lived, one-use JWT, signed with the
tenant's issuer key (ES256, ``typ`` ``poppy-join+jwt`` so it can pass for no other token
the issuer signs). ``aud`` is the callback URL exactly. It names the Session (``client_id``,
``sid``, ``sub``, ``agent_id``, Frontdoor's ``session`` ID) and, when the agent's step 2
carried a live access token, the ``account``, ``scope`` and grant family ``sgn`` that
token came from: without them the browser is a guest, never a user.

Verification is a :mod:`frontdoor_protocol.jwt_profile` profile (RFC 7519 §4.1, RFC 8725
§3.11 explicit typing; PAP-5-05): ``typ`` ``poppy-join+jwt``, ES256, a ``kid`` of the
issuer's JWKS, ``iss``, ``aud`` one string (the callback), ``0 < exp - iat <= 60``, not
expired, ``iat`` at most 60 s ahead; then the claims decode strictly into
:class:`JoinClaims` (no unknown member). Every refusal is ``invalid_grant`` with the same
descriptions as before, one table from refusal kind to words.

Pure: minting for the issuer, verifying for the company's sdk; the caller remembers the
``jti`` (one use) and the Session's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import sign_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.issuer_jwt import ISSUER_JWT_ALGORITHM, check_signing_key
from frontdoor_protocol.jws_verification import KeyProblem, refusal
from frontdoor_protocol.jwt_profile import JWTProfile, non_empty_string, verify_profiled_jwt
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind

__all__ = [
    "JOIN_ASSERTION_LIFETIME",
    "JOIN_ASSERTION_TYPE",
    "JoinClaims",
    "mint_join_assertion",
    "verify_join_assertion",
]

JOIN_ASSERTION_TYPE: Final = "poppy-join+jwt"
"""The ``typ`` of a join assertion (Frontdoor's own; no 1.0 text names one [Q9])."""
JOIN_ASSERTION_LIFETIME: Final = 60
"""Seconds a join assertion is valid: it is posted to the callback at once."""

_INVALID = ErrorCode.INVALID_GRANT
_NAME: Final = "join assertion"
_SKEW: Final = 60
_K = JWTRefusalKind

_PROFILE: Final = JWTProfile(
    types=frozenset({JOIN_ASSERTION_TYPE}),
    algorithms=frozenset({ISSUER_JWT_ALGORITHM}),
    kid_required=True,
    max_lifetime=JOIN_ASSERTION_LIFETIME,
    # Expired at exp itself (no skew), issued at most _SKEW ahead: a window, skew 0.
    iat_window=(JOIN_ASSERTION_LIFETIME + _SKEW, _SKEW),
    jti_valid=non_empty_string,
)
_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    _K.MALFORMED: "is not a compact JWS",
    _K.WRONG_TYPE: f"typ is not {JOIN_ASSERTION_TYPE}",
    _K.ALGORITHM_NOT_ACCEPTED: "header is not accepted",
    _K.EMBEDDED_KEY: "header is not accepted",
    _K.MALFORMED_KID: "header is not accepted",
    _K.MISSING_KID: "header is not accepted",
    _K.BAD_SIGNATURE: "signature is invalid",
    _K.WRONG_ISSUER: "is from another issuer",
    _K.WRONG_AUDIENCE: "is for another callback",
    _K.LIFETIME_TOO_LONG: "lifetime is not accepted",
    _K.ISSUED_IN_FUTURE: "lifetime is not accepted",
    _K.ISSUED_TOO_LONG_AGO: "has expired",
    _K.NOT_YET_VALID: "lifetime is not accepted",
    _K.EXPIRED: "has expired",
}
"""What each refused check says after "join assertion"; claim problems are "claims are malformed"."""
_KEY_PROBLEMS: Final[Mapping[JWTRefusalKind, KeyProblem]] = {
    _K.UNKNOWN_KEY: KeyProblem.UNKNOWN_KID,
    _K.AMBIGUOUS_KEY: KeyProblem.AMBIGUOUS,
    _K.KEY_DOES_NOT_FIT: KeyProblem.NO_FITTING_KEY,
}


def _error(refused: JWTRefusal) -> ProtocolError:
    problem = _KEY_PROBLEMS.get(refused.kind)
    if problem is not None:
        return refusal(_INVALID, problem, _NAME)
    return ProtocolError(_INVALID, f"{_NAME} {_DESCRIPTIONS.get(refused.kind, 'claims are malformed')}")


class JoinClaims(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The claims of a join assertion.

    Attributes:
        iss: The tenant's issuer.
        aud: The company's join callback URL.
        client_id: The agent (the Session JWT's ``iss``).
        sid: The agent's Session ID.
        sub: The Session's User ID.
        session: Frontdoor's ``ses_`` ID of the Session.
        agent_id: The Session's ``agent_id``, when it has one.
        account: The account of the live access token step 2 carried, else absent (a guest).
        scope: That token's scope.
        sgn: That token's grant family, so the company can re-check that it is still live.
        jti: One use.
        iat: Issued at.
        exp: Expiry, at most :data:`JOIN_ASSERTION_LIFETIME` after ``iat``.
    """

    iss: str
    aud: str
    client_id: str
    sid: str
    sub: str
    session: str
    jti: str
    iat: int
    exp: int
    agent_id: str | None = None
    account: str | None = None
    scope: str | None = None
    sgn: str | None = None


def mint_join_assertion(claims: JoinClaims, key: ECKey, kid: str) -> str:
    """Sign a join assertion with the tenant's current issuer key.

    Raises:
        ValueError: For an empty member, a lifetime outside 1 s..60 s, an account without
            its ``sgn`` (or the other way round), or a wrong key.
    """
    if not all((claims.iss, claims.aud, claims.client_id, claims.sid, claims.sub, claims.session, claims.jti)):
        raise ValueError("iss, aud, client_id, sid, sub, session and jti must be non-empty")
    if not 0 < claims.exp - claims.iat <= JOIN_ASSERTION_LIFETIME:
        raise ValueError("a join assertion lives between 1 second and 60 seconds")
    if (claims.account is None) != (claims.sgn is None):
        raise ValueError("a signed-in join names both its account and its sgn")
    check_signing_key(key, kid)
    header = {"alg": ISSUER_JWT_ALGORITHM, "typ": JOIN_ASSERTION_TYPE, "kid": kid}
    return sign_compact_jws(header, msgspec.structs.asdict(claims), key)


def verify_join_assertion(token: object, *, issuer: str, audience: str, keys: KeySet, now: int) -> JoinClaims:
    """Verify a join assertion at the company's callback; the caller claims its ``jti`` after.

    Args:
        token: The assertion as posted.
        issuer: The tenant's issuer; ``iss`` must equal it.
        audience: The callback URL the assertion was posted to; ``aud`` must equal it.
        keys: The issuer's signing keys (its JWKS).
        now: The current time, in seconds since the epoch.

    Raises:
        UnknownKeyId: No key has the ``kid``: refetch the issuer's JWKS once.
        ProtocolError: ``invalid_grant`` for any other failed check (Frontdoor's words only).
    """
    try:
        verified = verify_profiled_jwt(token, _PROFILE, keys=keys, issuer=issuer, audience=audience, now=now, skew=0)
    except JWTRefusal as refused:
        raise _error(refused) from None
    try:
        claims = msgspec.convert(verified.claims, JoinClaims, strict=True)
    except msgspec.ValidationError:
        raise ProtocolError(_INVALID, f"{_NAME} claims are malformed") from None
    if not all((claims.client_id, claims.sid, claims.sub, claims.session)) \
            or (claims.account is None) != (claims.sgn is None):
        raise ProtocolError(_INVALID, f"{_NAME} claims are malformed")
    return claims
