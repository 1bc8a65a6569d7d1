"""One declarative JWT profile and the one verifier that applies it (RFC 8725, RFC 7519).

Every signed message Frontdoor and the sdk check (browser assertions, the login handoff,
the mediated relay request, client and Session assertions...) follows the same steps; a
:class:`JWTProfile` declares what differs, and :func:`verify_profiled_jwt` applies them,
always in this order, so the first failed check is the one reported:

1. A strict compact JWS (:func:`parse_compact_jws`); ``typ`` one of the profile's media
   types (RFC 7515 §4.1.9, compared as :func:`media_type` says; absent only when the
   profile allows it), so one kind of JWT is never taken for another (PAP-5-05); ``alg``
   in the profile's public-key allow-list (GUIDE-jwt-02, PAP-4.3-20); no key carried in
   the header (GUIDE-jwt-03); a ``kid``, when present, a string.
2. The signature, by a key of the caller's :class:`KeySet` chosen by ``kid`` and ``alg``
   (:func:`select_verification_keys`); an unknown ``kid`` is its own refusal so the caller
   can refetch the signer's keys once (GUIDE-keys-02).
3. The claims, a strict JSON object: ``iss`` equal to the expected issuer; ``aud`` one
   string equal to the expected audience (never an array: the message is for exactly one
   party, PAP-4.1-05); ``exp`` and ``iat`` NumericDates with ``0 < exp - iat <=
   max_lifetime`` (PAP-4.2-08, PAP-5-06); not expired and not issued in the future beyond
   the skew, ``nbf`` likewise (GUIDE-jwt-04); a ``jti`` (GUIDE-jwt-05; one use is the
   caller's, who holds the replay store); then the profile's required claims in their
   declared order, and none of its forbidden claims.

Every refusal is one :class:`JWTRefusal` with a :class:`JWTRefusalKind` and, for a claim
problem, the claim's name; never a value from the token. Each message type keeps its own
public error class and reason enum through a small table from kind to reason.

joserfc's ``JWTClaimsRegistry`` is not used for step 3: it validates claims in the order
the *token* lists them (so the reason reported would depend on the sender's
serialization, and the existing reasons pin an order), accepts an ``aud`` array that
contains the expected value (PAP wants one string) and does not round a fractional
``exp`` up for the replay window. The key handling does use joserfc (key import, curve
and size, the signature itself).

Pure: no I/O, the clock is injected.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final, TypeVar

from joserfc.jwk import Key, KeySet

from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, parse_compact_jws
from frontdoor_protocol.jws_verification import (
    KeyProblem,
    allowed_algorithms,
    embeds_key,
    key_fits_algorithm,
    select_verification_keys,
    signature_verifies,
)
from frontdoor_protocol.jwt_claims import is_jwt_id, numeric_date

__all__ = [
    "ClaimRule",
    "JWTProfile",
    "JWTRefusal",
    "JWTRefusalKind",
    "ProfiledJWT",
    "check_profiled_claims",
    "check_profiled_signature",
    "media_type",
    "non_empty_string",
    "read_profiled_jws",
    "reason_table",
    "required_string",
    "verify_profiled_jwt",
]


class JWTRefusalKind(StrEnum):
    """Which check of :func:`verify_profiled_jwt` failed (stable, safe to log)."""

    MALFORMED = "malformed"
    """Not a compact JWS this library accepts."""
    WRONG_TYPE = "wrong_type"
    ALGORITHM_NOT_ACCEPTED = "algorithm_not_accepted"
    EMBEDDED_KEY = "embedded_key"
    MALFORMED_KID = "malformed_kid"
    UNKNOWN_KEY = "unknown_key"
    """No key has the ``kid`` (or none fits and there is no ``kid``): refetch once."""
    AMBIGUOUS_KEY = "ambiguous_key"
    """No ``kid`` and several keys fit."""
    KEY_DOES_NOT_FIT = "key_does_not_fit"
    """Keys with the ``kid`` exist but none fits the ``alg``."""
    BAD_SIGNATURE = "bad_signature"
    MALFORMED_CLAIMS = "malformed_claims"
    """The payload is not a strict JSON object."""
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"
    AUDIENCE_NOT_ONE_STRING = "audience_not_one_string"
    MISSING_CLAIM = "missing_claim"
    INVALID_CLAIM = "invalid_claim"
    FORBIDDEN_CLAIM = "forbidden_claim"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    """``exp - iat`` is above the maximum, or not positive."""
    EXPIRED = "expired"
    ISSUED_IN_FUTURE = "issued_in_future"
    """``iat`` is later than now plus the skew."""
    NOT_YET_VALID = "not_yet_valid"
    """``nbf`` is later than now plus the skew."""


class JWTRefusal(ValueError):
    """A profiled JWT is refused.

    Attributes:
        kind: The failed check.
        claim: The claim's name for a claim problem (Frontdoor's words, never a value).
    """

    def __init__(self, kind: JWTRefusalKind, claim: str | None = None) -> None:
        super().__init__(kind.value if claim is None else f"{kind.value}: {claim}")
        self.kind = kind
        self.claim = claim


_R = TypeVar("_R", bound=StrEnum)

_FOLDED: Final[Mapping[JWTRefusalKind, JWTRefusalKind]] = {
    JWTRefusalKind.MALFORMED_KID: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.MALFORMED_CLAIMS: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.AMBIGUOUS_KEY: JWTRefusalKind.BAD_SIGNATURE,
    JWTRefusalKind.KEY_DOES_NOT_FIT: JWTRefusalKind.BAD_SIGNATURE,
    JWTRefusalKind.AUDIENCE_NOT_ONE_STRING: JWTRefusalKind.WRONG_AUDIENCE,
    JWTRefusalKind.ISSUED_IN_FUTURE: JWTRefusalKind.NOT_YET_VALID,
    JWTRefusalKind.FORBIDDEN_CLAIM: JWTRefusalKind.INVALID_CLAIM,
}
"""How a type whose reasons are coarser than the kinds folds the finer ones."""


def reason_table(reasons: type[_R]) -> Mapping[JWTRefusalKind, _R]:
    """Each refusal kind as a message type's public reason of the same value.

    A kind the type has no reason for is folded into a coarser one (a malformed ``kid``
    is ``malformed``, an ambiguous key ``bad_signature``, an ``aud`` array
    ``wrong_audience``, a future ``iat`` ``not_yet_valid``, a forbidden claim
    ``invalid_claim``), so existing reason enums stay as they are.

    Args:
        reasons: The type's reason enum; it must have every unfolded kind's value.

    Returns:
        A complete table from kind to reason.

    Raises:
        ValueError: When ``reasons`` lacks a value a kind needs (at import time).
    """
    table: dict[JWTRefusalKind, _R] = {}
    for kind in JWTRefusalKind:
        try:
            table[kind] = reasons(kind.value)
        except ValueError:
            folded = _FOLDED.get(kind)
            if folded is None:
                raise ValueError(f"{reasons.__name__} has no reason for {kind.value}") from None
            table[kind] = reasons(folded.value)
    return table


def non_empty_string(value: object) -> bool:
    """Whether ``value`` is a string of at least one character."""
    return isinstance(value, str) and bool(value)


@dataclass(frozen=True, slots=True)
class ClaimRule:
    """A claim the profile requires after the registered ones.

    Attributes:
        name: The claim's name.
        valid: Whether its value is acceptable; ``invalid_claim`` otherwise.
    """

    name: str
    valid: Callable[[object], bool] = non_empty_string


@dataclass(frozen=True, slots=True, kw_only=True)
class JWTProfile:
    """What one kind of signed message requires (see the module docstring for the order).

    Attributes:
        types: Accepted ``typ`` values as :func:`media_type` returns them.
        typ_optional: Whether a header without ``typ`` is accepted too.
        algorithms: Accepted ``alg`` values; public-key algorithms only.
        max_lifetime: Most seconds from ``iat`` to ``exp``.
        required: Claims required after ``jti``, checked in this order.
        forbidden: Claims that must be absent.
        max_string_length: Longest ``iss``, ``jti`` and required string accepted, if bounded.
        kidless_tries_every_key: Without a ``kid``, try every fitting key (a signer
            rotating keys may publish two) instead of refusing several as ambiguous.
    """

    types: frozenset[str]
    algorithms: frozenset[str]
    max_lifetime: int
    typ_optional: bool = False
    required: tuple[ClaimRule, ...] = ()
    forbidden: tuple[str, ...] = ()
    max_string_length: int | None = None
    kidless_tries_every_key: bool = False

    def __post_init__(self) -> None:
        allowed_algorithms(self.algorithms)
        if self.max_lifetime <= 0:
            raise ValueError("max_lifetime must be positive")

    def with_limits(self, *, algorithms: Collection[str] | None = None, max_lifetime: int | None = None) -> JWTProfile:
        """This profile with a caller's narrower algorithms or lifetime (``self`` if unchanged)."""
        chosen = self.algorithms if algorithms is None else frozenset(algorithms)
        lifetime = self.max_lifetime if max_lifetime is None else max_lifetime
        if chosen == self.algorithms and lifetime == self.max_lifetime:
            return self
        return replace(self, algorithms=chosen, max_lifetime=lifetime)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfiledJWT:
    """A JWT that passed its profile.

    Attributes:
        claims: Every claim, as decoded.
        jti: ``jti``.
        iat: ``iat``, whole seconds.
        exp: ``exp``, whole seconds rounded up (keep the ``jti`` until then plus the skew).
        kid: The ``kid`` of the key that verified the signature.
        alg: The signature algorithm.
    """

    claims: dict[str, Any]
    jti: str
    iat: int
    exp: int
    kid: str | None
    alg: str


def media_type(value: object) -> str | None:
    """A ``typ``/``cty`` value compared as RFC 7515 §4.1.9 says: case-insensitively,
    with an omitted ``application/`` prefix.

    Args:
        value: The header member.

    Returns:
        The lower-case media type without ``application/``, or ``None`` for a non-string.
    """
    if not isinstance(value, str):
        return None
    return value.lower().removeprefix("application/")


def read_profiled_jws(token: object, profile: JWTProfile) -> CompactJWS:
    """Step 1: parse ``token`` and check its header against ``profile``.

    Raises:
        JWTRefusal: ``malformed``, ``wrong_type``, ``algorithm_not_accepted``,
            ``embedded_key`` or ``malformed_kid``.
    """
    try:
        jws = parse_compact_jws(token)
    except MalformedJWS:
        raise JWTRefusal(JWTRefusalKind.MALFORMED) from None
    header = jws.header
    typ_checked = "typ" in header or not profile.typ_optional
    if typ_checked and media_type(header.get("typ")) not in profile.types:
        raise JWTRefusal(JWTRefusalKind.WRONG_TYPE)
    if jws.alg not in profile.algorithms:
        raise JWTRefusal(JWTRefusalKind.ALGORITHM_NOT_ACCEPTED)
    if embeds_key(header):
        raise JWTRefusal(JWTRefusalKind.EMBEDDED_KEY)
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise JWTRefusal(JWTRefusalKind.MALFORMED_KID)
    return jws


_KEY_PROBLEMS: Final[Mapping[KeyProblem, JWTRefusalKind]] = {
    KeyProblem.UNKNOWN_KID: JWTRefusalKind.UNKNOWN_KEY,
    KeyProblem.AMBIGUOUS: JWTRefusalKind.AMBIGUOUS_KEY,
    KeyProblem.NO_FITTING_KEY: JWTRefusalKind.KEY_DOES_NOT_FIT,
}


def check_profiled_signature(jws: CompactJWS, profile: JWTProfile, keys: KeySet) -> Key:
    """Step 2: the signature of a JWS that :func:`read_profiled_jws` returned.

    Returns:
        The key that verified it.

    Raises:
        JWTRefusal: ``unknown_key`` (refetch the signer's keys once and retry),
            ``ambiguous_key``, ``key_does_not_fit`` or ``bad_signature``.
    """
    kid = jws.header.get("kid")
    selected: tuple[Key, ...] | KeyProblem
    if kid is None and profile.kidless_tries_every_key:
        selected = tuple(key for key in keys.keys if key_fits_algorithm(key, jws.alg)) or KeyProblem.UNKNOWN_KID
    else:
        selected = select_verification_keys(keys, kid=kid, alg=jws.alg)
    if isinstance(selected, KeyProblem):
        raise JWTRefusal(_KEY_PROBLEMS[selected])
    for key in selected:
        if signature_verifies(jws, key):
            return key
    raise JWTRefusal(JWTRefusalKind.BAD_SIGNATURE)


def required_string(claims: Mapping[str, Any], name: str, *, max_length: int | None = None) -> str:
    """A claim that must be a non-empty string (at most ``max_length`` characters).

    Raises:
        JWTRefusal: ``missing_claim`` or ``invalid_claim``, naming ``name``.
    """
    if name not in claims:
        raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, name)
    value = claims[name]
    if not isinstance(value, str) or not value or (max_length is not None and len(value) > max_length):
        raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, name)
    return value


def _time(claims: Mapping[str, Any], name: str, *, round_up: bool = False) -> int:
    if name not in claims:
        raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, name)
    value = numeric_date(claims[name], round_up=round_up)
    if value is None:
        raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, name)
    return value


def check_profiled_claims(
    jws: CompactJWS,
    profile: JWTProfile,
    *,
    issuer: str,
    audience: str,
    now: int,
    skew: int,
    kid: str | None = None,
) -> ProfiledJWT:
    """Step 3: the claims of a JWS whose signature was checked.

    Args:
        jws: The verified JWS.
        profile: Its profile.
        issuer: What ``iss`` must equal.
        audience: What ``aud`` must equal, as one string.
        now: The current time, seconds since the epoch.
        skew: Seconds of clock difference tolerated.
        kid: The ``kid`` of the key that verified it, for the result.

    Raises:
        JWTRefusal: For the first failed claim check, in the module docstring's order.
    """
    try:
        claims = jws.claims()
    except MalformedJWS:
        raise JWTRefusal(JWTRefusalKind.MALFORMED_CLAIMS) from None
    limit = profile.max_string_length
    if required_string(claims, "iss", max_length=limit) != issuer:
        raise JWTRefusal(JWTRefusalKind.WRONG_ISSUER)
    if "aud" not in claims:
        raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, "aud")
    aud = claims["aud"]
    if not isinstance(aud, str):
        raise JWTRefusal(JWTRefusalKind.AUDIENCE_NOT_ONE_STRING)
    if aud != audience:
        raise JWTRefusal(JWTRefusalKind.WRONG_AUDIENCE)
    exp = _time(claims, "exp", round_up=True)
    iat = _time(claims, "iat")
    if exp <= iat or exp - iat > profile.max_lifetime:
        raise JWTRefusal(JWTRefusalKind.LIFETIME_TOO_LONG)
    if now >= exp + skew:
        raise JWTRefusal(JWTRefusalKind.EXPIRED)
    if iat > now + skew:
        raise JWTRefusal(JWTRefusalKind.ISSUED_IN_FUTURE)
    if "nbf" in claims:
        nbf = numeric_date(claims["nbf"])
        if nbf is None:
            raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, "nbf")
        if nbf > now + skew:
            raise JWTRefusal(JWTRefusalKind.NOT_YET_VALID)
    jti = required_string(claims, "jti", max_length=limit)
    if not is_jwt_id(jti):
        raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, "jti")
    for rule in profile.required:
        if rule.name not in claims:
            raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, rule.name)
        value = claims[rule.name]
        if not rule.valid(value) or (limit is not None and isinstance(value, str) and len(value) > limit):
            raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, rule.name)
    for name in profile.forbidden:
        if name in claims:
            raise JWTRefusal(JWTRefusalKind.FORBIDDEN_CLAIM, name)
    return ProfiledJWT(claims=claims, jti=jti, iat=iat, exp=exp, kid=kid, alg=jws.alg)


def verify_profiled_jwt(
    token: object,
    profile: JWTProfile,
    *,
    keys: KeySet,
    issuer: str,
    audience: str,
    now: int,
    skew: int,
) -> ProfiledJWT:
    """Verify ``token`` against ``profile``: header, signature, then claims.

    Args:
        token: The compact JWT as received.
        profile: What this kind of message requires.
        keys: The signer's trusted keys (never from the token).
        issuer: What ``iss`` must equal.
        audience: What ``aud`` must equal, as one string.
        now: The current time, seconds since the epoch.
        skew: Seconds of clock difference tolerated (validated by the caller).

    Returns:
        The verified claims and the times and ``jti`` the caller's replay check needs.

    Raises:
        JWTRefusal: The first failed check; ``unknown_key`` means refetch the keys once.
    """
    jws = read_profiled_jws(token, profile)
    key = check_profiled_signature(jws, profile, keys)
    return check_profiled_claims(jws, profile, issuer=issuer, audience=audience, now=now, skew=skew, kid=key.kid)
