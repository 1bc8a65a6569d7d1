"""PAP 1.0 ``Poppy-Session`` JWTs: the per-request Session proof signed by a delegated key.

In the order of [S §3] and ADR 0004 §3; every refusal is ``invalid_session`` with a fixed
description (answered 400 with no challenge, nothing echoed [S §4]):

1. Exactly one ``Poppy-Session`` header of at most 8 KiB (:func:`poppy_session_value`).
2. Header (:func:`parse_poppy_session`): ``typ`` ``poppy-session+jwt``, ``alg`` ES256
   only [Q13], ``kid`` and ``poppy_dlg`` strings; ``jwk``, ``jku``, ``x5u``, ``x5c`` and
   ``crit`` refused; strict JSON (duplicate members refused) in header and claims.
3. The unverified ``iss`` is an HTTPS URL (``http://`` on loopback only in development):
   it names the client whose identity keys the caller loads (I/O, outside this library).
4. The delegation (:mod:`frontdoor_protocol.delegation`).
5. ``kid`` is the RFC 7638 thumbprint of the delegated key and the JWT is signed by it:
   a JWT the identity key signed itself fails here [S §3].
6. Claims: ``aud`` one string equal to the company identifier (the tenant's issuer)
   character for character; ``sid`` and ``sub`` match ``^[A-Za-z0-9_-]{1,256}$`` [Q14];
   ``agent_id`` optional, 1-256 printable ASCII; ``htm`` the method; ``htu`` the request
   URL (RFC 9449 normalisation, no query or fragment); ``iat`` within ``±max_age`` [Q2];
   ``exp``, if present, not passed; ``jti`` 1-256 characters.
7. ``ath`` present exactly when an access token is sent, equal to its SHA-256 [S §3].

Steps 2, 5 (the signature), 6 and 7 are a :mod:`frontdoor_protocol.jwt_profile` profile:
the header step, the one delegated key, then ``iss``, ``aud``, an optional ``exp`` (no
skew), ``iat`` in the window, ``jti``, ``sid``/``sub`` and the request and ``ath``
bindings of :mod:`frontdoor_protocol.jwt_binding` (in that order); ``agent_id`` last.
Every description is unchanged, one table from refusal kind (and claim) to words.

Replay of ``jti`` and the Session's state are the caller's (they need storage). So is the
optional :class:`~frontdoor_protocol.delegation.DelegationCache` passed as ``delegations``:
it skips re-parsing and re-verifying a delegation seen before, while every check of steps
5 to 7 and the delegation's ``iss``, ``kid`` and times still run on each request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, sign_compact_jws
from frontdoor_protocol.delegation import DelegationCache, parse_delegation, verify_delegation
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.http_target_uri import htu_normalize
from frontdoor_protocol.https_url import https_url_problem, is_loopback_http_url
from frontdoor_protocol.jwk_thumbprint import jwk_thumbprint
from frontdoor_protocol.jwt_binding import (
    access_token_binding,
    access_token_hash,
    constant_time_equal,
    request_binding,
)
from frontdoor_protocol.jwt_claims import MAX_JTI_LENGTH
from frontdoor_protocol.jwt_profile import (
    ClaimRule,
    JWTProfile,
    check_profiled_claims,
    check_profiled_signature,
    read_profiled_jws,
)
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind
from frontdoor_protocol.resource_request import RequestHeaders, header_values

__all__ = [
    "DEFAULT_SESSION_MAX_AGE",
    "MAX_SESSION_HEADER_LENGTH",
    "POPPY_SESSION_HEADER",
    "SESSION_JWT_ALGORITHM",
    "SESSION_JWT_TYPE",
    "DelegatedSession",
    "SessionHeader",
    "is_session_id",
    "mint_poppy_session",
    "parse_poppy_session",
    "poppy_session_value",
    "verify_poppy_session",
]

POPPY_SESSION_HEADER: Final = "Poppy-Session"
"""The request header carrying the Session JWT [S §3]."""
DEFAULT_SESSION_MAX_AGE: Final = 60
"""Seconds a Session JWT's ``iat`` may be before or after now (ADR 0004 §3; Q2)."""
MAX_SESSION_HEADER_LENGTH: Final = 8192
"""Longest ``Poppy-Session`` value accepted: 8 KiB, delegation included."""
SESSION_JWT_TYPE: Final = "poppy-session+jwt"
SESSION_JWT_ALGORITHM: Final = "ES256"

_INVALID = ErrorCode.INVALID_SESSION
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,256}")
_AGENT_ID: Final = re.compile(r"[\x20-\x7e]{1,256}")
_K = JWTRefusalKind


def _refuse(description: str) -> ProtocolError:
    return ProtocolError(_INVALID, description)


def is_session_id(value: object) -> bool:
    """Whether ``value`` has the 1.0 ID syntax of ``sid`` and ``sub``: 1-256 base64url characters [Q14]."""
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def _is_session_jti(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_JTI_LENGTH


@lru_cache(maxsize=8)
def _profile(max_age: int) -> JWTProfile:
    """[S §3] as a profile; ``iat`` within ``±max_age``, ``exp`` optional and unskewed."""
    return JWTProfile(
        types=frozenset({SESSION_JWT_TYPE}),
        typ_exact=True,
        algorithms=frozenset({SESSION_JWT_ALGORITHM}),
        kid_required=True,
        exp_required=False,
        max_lifetime=None,
        iat_window=(max_age, max_age),
        required=(ClaimRule("sid", is_session_id), ClaimRule("sub", is_session_id)),
        jti_valid=_is_session_jti,
    )


_HEADER_PROFILE: Final = _profile(DEFAULT_SESSION_MAX_AGE)
_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    _K.MALFORMED: "is not a compact JWS",
    _K.CRITICAL_HEADER: "header must not carry a key or crit",
    _K.WRONG_TYPE: "typ is not poppy-session+jwt",
    _K.ALGORITHM_NOT_ACCEPTED: "alg is not ES256",
    _K.EMBEDDED_KEY: "header must not carry a key or crit",
    _K.MISSING_KID: "has no kid",
    _K.MALFORMED_KID: "has no kid",
    _K.KEY_DOES_NOT_FIT: "signature is invalid",
    _K.BAD_SIGNATURE: "signature is invalid",
    _K.MALFORMED_CLAIMS: "claims are not a JSON object",
    _K.WRONG_ISSUER: "iss is not the client",
    _K.WRONG_AUDIENCE: "aud is not this company",
    _K.AUDIENCE_NOT_ONE_STRING: "aud is not this company",
    _K.EXPIRED: "has expired",
    _K.ISSUED_IN_FUTURE: "iat is outside the acceptance window",
    _K.ISSUED_TOO_LONG_AGO: "iat is outside the acceptance window",
    _K.NOT_YET_VALID: "is not valid yet",
}
"""What each refused check says after "the Session JWT" (stable descriptions)."""
_CLAIM_DESCRIPTIONS: Final[Mapping[tuple[JWTRefusalKind | None, str], str]] = {
    (None, "iss"): "iss is missing",
    (None, "aud"): "aud is not this company",
    (None, "sid"): "sid or sub is malformed",
    (None, "sub"): "sid or sub is malformed",
    (None, "htm"): "htm does not match the request",
    (None, "htu"): "htu does not match the request",
    (None, "iat"): "iat is outside the acceptance window",
    (None, "exp"): "has expired",
    (None, "nbf"): "is not valid yet",
    (None, "jti"): "jti is missing",
    (_K.FORBIDDEN_CLAIM, "ath"): "has ath but no access token was sent",
    (_K.MISSING_CLAIM, "ath"): "has no ath for the access token",
    (None, "ath"): "ath does not match the access token",
}
"""A claim problem by (kind, claim), or by claim alone for any kind."""


def _error(refused: JWTRefusal) -> ProtocolError:
    if refused.claim is None:
        words = _DESCRIPTIONS.get(refused.kind, "is not accepted")
    else:
        words = _CLAIM_DESCRIPTIONS.get((refused.kind, refused.claim)) or _CLAIM_DESCRIPTIONS.get(
            (None, refused.claim), "claims are not accepted"
        )
    return _refuse(f"the Session JWT {words}")


class SessionHeader(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed, **unverified** ``Poppy-Session`` value: enough to load the client's keys.

    Attributes:
        jws: The Session JWT, parsed once.
        claims: Its claims (strict JSON), not yet trusted.
        delegation: The ``poppy_dlg`` delegation, parsed once.
        delegation_token: The ``poppy_dlg`` value exactly as received (the delegation cache's key).
        client_id: The unverified ``iss``: whose identity keys to load.
        delegation_kid: The delegation's ``kid``: which identity key to use.
    """

    jws: CompactJWS
    claims: dict[str, Any]
    delegation: CompactJWS
    delegation_token: str
    client_id: str
    delegation_kid: str


class DelegatedSession(msgspec.Struct, frozen=True, kw_only=True):
    """What a verified Session JWT says; the Session's state is the caller's to look up.

    Attributes:
        client_id: The agent's Client ID (``iss``).
        sub: The company-scoped User ID.
        sid: The agent's Session ID.
        agent_id: The optional Agent ID.
        jti: The Session JWT's ``jti`` (replay key with ``client_id``).
        iat: Its ``iat``, whole seconds.
        exp: Its ``exp`` when present.
        delegated_jkt: RFC 7638 thumbprint of the delegated key that signed it.
        delegation_jti: The delegation's ``jti``.
        delegation_exp: When the delegation expires.
    """

    client_id: str
    sub: str
    sid: str
    agent_id: str | None
    jti: str
    iat: int
    exp: int | None
    delegated_jkt: str
    delegation_jti: str
    delegation_exp: int


def poppy_session_value(headers: RequestHeaders) -> str | None:
    """The request's one ``Poppy-Session`` value (step 1).

    Args:
        headers: The request headers, repeats kept.

    Returns:
        The value, or ``None`` when the request has no ``Poppy-Session`` header.

    Raises:
        ProtocolError: ``invalid_session`` for two or more headers or one over 8 KiB.
    """
    values = header_values(headers, POPPY_SESSION_HEADER)
    if not values:
        return None
    if len(values) > 1:
        raise _refuse("the request has more than one Poppy-Session header")
    if len(values[0]) > MAX_SESSION_HEADER_LENGTH:
        raise _refuse("the Poppy-Session header is too long")
    return values[0]


def _check_client_id(value: object, allow_http_loopback: bool) -> str:
    if not isinstance(value, str):
        raise _refuse("the Session JWT iss is missing")
    if https_url_problem(value) is not None and not (allow_http_loopback and is_loopback_http_url(value)):
        raise _refuse("the Session JWT iss is not an https URL")
    return value


def parse_poppy_session(
    value: str, *, allow_http_loopback: bool = False, delegations: DelegationCache | None = None
) -> SessionHeader:
    """Parse a ``Poppy-Session`` value without trusting it (steps 2 and 3).

    Args:
        value: The header value from :func:`poppy_session_value`.
        allow_http_loopback: Development only: accept an ``http://`` loopback ``iss``.
        delegations: The caller's cache of verified delegations: one seen before is not
            parsed again.

    Returns:
        The parsed header; :attr:`SessionHeader.client_id` names the keys to load.

    Raises:
        ProtocolError: ``invalid_session``.
    """
    try:
        jws = read_profiled_jws(value, _HEADER_PROFILE, max_length=MAX_SESSION_HEADER_LENGTH)
    except JWTRefusal as refused:
        raise _error(refused) from None
    header = jws.header
    if not isinstance(header.get("poppy_dlg"), str):
        raise _refuse("the Session JWT has no delegation")
    token = header["poppy_dlg"]
    delegation = (delegations.parsed(token) if delegations is not None else None) or parse_delegation(token)
    try:
        claims = jws.claims()
    except MalformedJWS:
        raise _refuse("the Session JWT claims are not a JSON object") from None
    client_id = _check_client_id(claims.get("iss"), allow_http_loopback)
    return SessionHeader(
        jws=jws,
        claims=claims,
        delegation=delegation,
        delegation_token=token,
        client_id=client_id,
        delegation_kid=str(delegation.header["kid"]),
    )


def verify_poppy_session(
    header: SessionHeader,
    *,
    identity_keys: KeySet,
    audience: str,
    method: str,
    url: str,
    now: int,
    access_token: str | None,
    max_age: int = DEFAULT_SESSION_MAX_AGE,
    allow_http_loopback: bool = False,
    delegations: DelegationCache | None = None,
) -> DelegatedSession:
    """Verify a parsed ``Poppy-Session`` JWT for one request (steps 3 to 7).

    Two signature checks: the delegation by the identity key, the JWT by the delegated key.

    Args:
        header: From :func:`parse_poppy_session`.
        identity_keys: The identity keys of ``header.client_id`` (its verified ``jwks_uri``).
        audience: The company identifier: the tenant's issuer, compared exactly.
        method: The request method.
        url: The request URL as the agent addressed it (public scheme, host and path).
        now: The current time, in seconds since the epoch.
        access_token: The token sent in ``Authorization``, or ``None``.
        max_age: Seconds ``iat`` may be before or after ``now``.
        allow_http_loopback: Development only: accept an ``http://`` loopback ``iss``.
        delegations: The caller's cache of verified delegations (see the module docstring).

    Returns:
        The verified Session claims.

    Raises:
        UnknownAgentKeyId: (an :class:`UnknownKeyId`) no identity key has the delegation's
            ``kid``: reload the agent's keys once and retry.
        ProtocolError: ``invalid_session`` for every other failed check.
        ValueError: When ``url`` is not an absolute http(s) URL (a caller bug).
    """
    htu_normalize(url)  # a bad request URL is the caller's bug, not the agent's
    client_id = _check_client_id(header.client_id, allow_http_loopback)
    if delegations is None:
        delegation = verify_delegation(header.delegation, client_id=client_id, identity_keys=identity_keys, now=now)
    else:
        delegation = delegations.verify(header.delegation_token, header.delegation, client_id=client_id,
                                        identity_keys=identity_keys, now=now)
    jws = header.jws
    if not constant_time_equal(str(jws.header["kid"]), delegation.jkt):
        raise _refuse("the Session JWT kid is not the delegated key thumbprint")
    profile = _profile(max_age)
    bindings = (request_binding(method, url), access_token_binding(access_token))
    try:
        check_profiled_signature(jws, profile, delegation.key)
        verified = check_profiled_claims(
            jws, profile, issuer=client_id, audience=audience, now=now, skew=0, key=delegation.key, bindings=bindings
        )
    except JWTRefusal as refused:
        raise _error(refused) from None
    claims = verified.claims
    agent_id = claims.get("agent_id")
    if agent_id is not None and (not isinstance(agent_id, str) or _AGENT_ID.fullmatch(agent_id) is None):
        raise _refuse("the Session JWT agent_id is malformed")
    sid, sub, jti, iat = claims["sid"], claims["sub"], verified.jti, verified.iat
    exp = verified.exp if "exp" in claims else None
    return DelegatedSession(
        client_id=client_id,
        sub=str(sub),
        sid=str(sid),
        agent_id=agent_id,
        jti=jti,
        iat=iat,
        exp=exp,
        delegated_jkt=delegation.jkt,
        delegation_jti=delegation.jti,
        delegation_exp=delegation.exp,
    )


def mint_poppy_session(
    *,
    delegated_key: ECKey,
    delegation: str,
    client_id: str,
    audience: str,
    sid: str,
    sub: str,
    method: str,
    url: str,
    iat: int,
    jti: str,
    access_token: str | None = None,
    agent_id: str | None = None,
    exp: int | None = None,
) -> str:
    """Sign a ``Poppy-Session`` JWT as an agent does (for tests and benchmarks only).

    Args:
        delegated_key: The private delegated P-256 key the delegation vouches for.
        delegation: The compact delegation (:func:`~frontdoor_protocol.delegation.mint_delegation`).
        client_id: The agent's Client ID.
        audience: The company identifier.
        sid: The Session ID.
        sub: The User ID.
        method: The request method.
        url: The request URL; any query or fragment is dropped from ``htu``.
        iat: Issued at.
        jti: A unique request ID.
        access_token: The access token sent with the request, bound by ``ath``.
        agent_id: The optional Agent ID.
        exp: An optional expiry.

    Returns:
        The header value.
    """
    public_jwk = delegated_key.as_dict(private=False)
    header = {"alg": SESSION_JWT_ALGORITHM, "typ": SESSION_JWT_TYPE, "kid": jwk_thumbprint(public_jwk)}
    header["poppy_dlg"] = delegation
    claims = {
        "iss": client_id,
        "aud": audience,
        "sid": sid,
        "sub": sub,
        "agent_id": agent_id,
        "htm": method,
        "htu": url.split("#", 1)[0].split("?", 1)[0],
        "iat": iat,
        "exp": exp,
        "jti": jti,
        "ath": None if access_token is None else access_token_hash(access_token),
    }
    return sign_compact_jws(header, claims, delegated_key)
