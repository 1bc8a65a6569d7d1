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
   A profile may require a ``kid`` (tokens signed by a key set that rotates), or take
   its key from the ``jwk`` header instead (:attr:`KeySource.HEADER_JWK`, a DPoP proof,
   RFC 9449 §4.2): a public key only, fitting the ``alg``; its RFC 7638 thumbprint is
   returned for the caller's binding check.
2. The signature, by a key of the caller's :class:`KeySet` chosen by ``kid`` and ``alg``
   (:func:`select_verification_keys`), by the caller's one known key, or by the header's
   ``jwk``; an unknown ``kid`` is its own refusal so the caller can refetch the signer's
   keys once (GUIDE-keys-02).
3. The claims, a strict JSON object: ``iss`` equal to the expected issuer (unless the
   profile has none, RFC 9449 §4.2); ``aud`` one string equal to the expected audience
   (never an array: the message is for exactly one party, PAP-4.1-05), or for an access
   token a string or array holding one of the accepted audiences (RFC 7519 §4.1.3, RFC
   9068 §4), or not read at all; ``exp`` and ``iat`` NumericDates with ``0 < exp - iat
   <= max_lifetime`` (PAP-4.2-08, PAP-5-06), ``exp`` optional where the profile says so;
   not expired and not issued in the future beyond the skew, or ``iat`` inside the
   profile's acceptance window (RFC 9449 §11.1, PAP-4.3-05), ``nbf`` likewise
   (GUIDE-jwt-04); a ``jti`` (GUIDE-jwt-05; one use is the caller's, who holds the
   replay store); then the profile's required claims in their declared order, and none
   of its forbidden claims.
4. The caller's bindings, in the order given (:mod:`frontdoor_protocol.jwt_binding`:
   ``htm``/``htu`` to the request, ``ath`` to the access token, the key to ``cnf.jkt``).

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

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Final

from joserfc.jwk import Key, KeySet

from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, parse_compact_jws
from frontdoor_protocol.jws_verification import (
    EMBEDDED_KEY_HEADERS,
    KeyProblem,
    allowed_algorithms,
    embeds_key,
    key_fits_algorithm,
    select_verification_keys,
    signature_verifies,
)
from frontdoor_protocol.jwt_claims import is_jwt_id, numeric_date
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind, reason_table
from frontdoor_protocol.public_jwk import PublicJWKProblem, import_public_jwk

__all__ = [
    "AudienceRule",
    "ClaimBinding",
    "ClaimRule",
    "JWTProfile",
    "JWTRefusal",
    "JWTRefusalKind",
    "KeySource",
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


def non_empty_string(value: object) -> bool:
    """Whether ``value`` is a string of at least one character."""
    return isinstance(value, str) and bool(value)


class AudienceRule(StrEnum):
    """How a profile reads ``aud`` (RFC 7519 §4.1.3)."""

    ONE = "one"
    """One string equal to the expected audience, never an array (PAP-4.1-05)."""
    ANY_OF = "any_of"
    """A string or a non-empty array of strings, one of them accepted (RFC 9068 §4)."""


class KeySource(StrEnum):
    """Where the verifying key comes from."""

    KEY_SET = "key_set"
    """The caller's trusted keys (never the token's), chosen by ``kid`` and ``alg``."""
    HEADER_JWK = "header_jwk"
    """The ``jwk`` header (RFC 9449 §4.2): the caller binds its thumbprint (``cnf.jkt``)."""


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
        typ_exact: Compare ``typ`` exactly instead of as a media type (where the
            specification says "exactly", e.g. PAP-4.3-20 for ``dpop+jwt``).
        algorithms: Accepted ``alg`` values; public-key algorithms only.
        max_lifetime: Most seconds from ``iat`` to ``exp``; ``None`` only with an
            optional ``exp`` (then a present ``exp`` is only checked for expiry).
        exp_required: Whether ``exp`` must be present.
        iat_window: Seconds ``iat`` may be before and after now, replacing the skew for
            ``iat`` (a proof that lives by its age, RFC 9449 §11.1); ``None``: the skew.
        issuer_required: Whether ``iss`` is read (and must equal the caller's issuer).
        audience: How ``aud`` is read; ``None``: not read (forbid it if it must be absent).
        kid_required: Whether a header without ``kid`` is refused (``missing_kid``).
        key_source: Where the verifying key comes from.
        required: Claims required after ``jti``, checked in this order.
        forbidden: Claims that must be absent.
        jti_valid: Whether a ``jti`` is acceptable (default :func:`is_jwt_id`).
        max_string_length: Longest ``iss``, ``jti`` and required string accepted, if bounded.
        kidless_tries_every_key: Without a ``kid``, try every fitting key (a signer
            rotating keys may publish two) instead of refusing several as ambiguous.
    """

    types: frozenset[str]
    algorithms: frozenset[str]
    max_lifetime: int | None
    exp_required: bool = True
    iat_window: tuple[int, int] | None = None
    typ_optional: bool = False
    typ_exact: bool = False
    issuer_required: bool = True
    audience: AudienceRule | None = AudienceRule.ONE
    kid_required: bool = False
    key_source: KeySource = KeySource.KEY_SET
    required: tuple[ClaimRule, ...] = ()
    forbidden: tuple[str, ...] = ()
    jti_valid: Callable[[object], bool] = is_jwt_id
    max_string_length: int | None = None
    kidless_tries_every_key: bool = False

    def __post_init__(self) -> None:
        allowed_algorithms(self.algorithms)
        if self.max_lifetime is None and self.exp_required:
            raise ValueError("a profile that requires exp needs max_lifetime")
        if self.max_lifetime is not None and self.max_lifetime <= 0:
            raise ValueError("max_lifetime must be positive")
        if self.iat_window is not None and min(self.iat_window) < 0:
            raise ValueError("iat_window values must be non-negative")

    def with_limits(
        self,
        *,
        algorithms: Collection[str] | None = None,
        max_lifetime: int | None = None,
        iat_window: tuple[int, int] | None = None,
    ) -> JWTProfile:
        """This profile with a caller's narrower algorithms, lifetime or window (``self`` if unchanged)."""
        chosen = self.algorithms if algorithms is None else frozenset(algorithms)
        lifetime = self.max_lifetime if max_lifetime is None else max_lifetime
        window = self.iat_window if iat_window is None else iat_window
        if chosen == self.algorithms and lifetime == self.max_lifetime and window == self.iat_window:
            return self
        return replace(self, algorithms=chosen, max_lifetime=lifetime, iat_window=window)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfiledJWT:
    """A JWT that passed its profile.

    Attributes:
        claims: Every claim, as decoded.
        jti: ``jti``.
        iat: ``iat``, whole seconds.
        exp: ``exp``, whole seconds rounded up (keep the ``jti`` until then plus the skew);
            for a profile with an optional ``exp`` and a token without one, the last
            second of the ``iat`` window (``"exp" in claims`` tells them apart).
        kid: The ``kid`` of the key that verified the signature.
        alg: The signature algorithm.
        key: The key that verified the signature.
        jkt: RFC 7638 thumbprint of a ``jwk`` header key (:attr:`KeySource.HEADER_JWK`).
    """

    claims: dict[str, Any]
    jti: str
    iat: int
    exp: int
    kid: str | None
    alg: str
    key: Key | None = None
    jkt: str | None = None


ClaimBinding = Callable[[ProfiledJWT], None]
"""A check of a verified JWT against the request it came with; raises :class:`JWTRefusal`."""


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


_NON_JWK_KEY_HEADERS: Final = EMBEDDED_KEY_HEADERS - {"jwk"}


def read_profiled_jws(token: object, profile: JWTProfile, *, max_length: int | None = None) -> CompactJWS:
    """Step 1: parse ``token`` and check its header against ``profile``.

    Args:
        token: The compact JWT as received.
        profile: Its profile.
        max_length: A longer limit than :func:`parse_compact_jws`'s default, if any.

    Raises:
        JWTRefusal: ``malformed``, ``critical_header``, ``wrong_type``, ``algorithm_not_accepted``,
            ``embedded_key``, ``malformed_kid`` or ``missing_kid``.
    """
    try:
        jws = parse_compact_jws(token) if max_length is None else parse_compact_jws(token, max_length=max_length)
    except MalformedJWS as error:
        critical = error.reason == "critical_header"
        raise JWTRefusal(JWTRefusalKind.CRITICAL_HEADER if critical else JWTRefusalKind.MALFORMED) from None
    header = jws.header
    typ_checked = "typ" in header or not profile.typ_optional
    typ = header.get("typ") if profile.typ_exact else media_type(header.get("typ"))
    if typ_checked and typ not in profile.types:
        raise JWTRefusal(JWTRefusalKind.WRONG_TYPE)
    if jws.alg not in profile.algorithms:
        raise JWTRefusal(JWTRefusalKind.ALGORITHM_NOT_ACCEPTED)
    if profile.key_source is KeySource.HEADER_JWK:
        if not _NON_JWK_KEY_HEADERS.isdisjoint(header):
            raise JWTRefusal(JWTRefusalKind.EMBEDDED_KEY)
    elif embeds_key(header):
        raise JWTRefusal(JWTRefusalKind.EMBEDDED_KEY)
    if profile.key_source is KeySource.HEADER_JWK:
        return jws  # the key is the jwk: a kid names nothing here
    kid = header.get("kid")
    if kid is None and profile.kid_required:
        raise JWTRefusal(JWTRefusalKind.MISSING_KID)
    if kid is not None and not isinstance(kid, str):
        raise JWTRefusal(JWTRefusalKind.MALFORMED_KID)
    return jws


_KEY_PROBLEMS: Final[Mapping[KeyProblem, JWTRefusalKind]] = {
    KeyProblem.UNKNOWN_KID: JWTRefusalKind.UNKNOWN_KEY,
    KeyProblem.AMBIGUOUS: JWTRefusalKind.AMBIGUOUS_KEY,
    KeyProblem.NO_FITTING_KEY: JWTRefusalKind.KEY_DOES_NOT_FIT,
}
_JWK_PROBLEMS: Final[Mapping[PublicJWKProblem, JWTRefusalKind]] = {
    PublicJWKProblem.MISSING: JWTRefusalKind.HEADER_KEY_MISSING,
    PublicJWKProblem.PRIVATE: JWTRefusalKind.HEADER_KEY_PRIVATE,
    PublicJWKProblem.INVALID: JWTRefusalKind.HEADER_KEY_INVALID,
    PublicJWKProblem.DOES_NOT_FIT: JWTRefusalKind.KEY_DOES_NOT_FIT,
}


def header_key(jws: CompactJWS) -> tuple[Key, str]:
    """The public key of the ``jwk`` header and its thumbprint (:attr:`KeySource.HEADER_JWK`).

    Raises:
        JWTRefusal: ``header_key_missing``, ``header_key_private``, ``header_key_invalid``
            or ``key_does_not_fit``.
    """
    imported = import_public_jwk(jws.header.get("jwk"), jws.alg)
    if isinstance(imported, PublicJWKProblem):
        raise JWTRefusal(_JWK_PROBLEMS[imported])
    return imported


def check_profiled_signature(jws: CompactJWS, profile: JWTProfile, keys: KeySet | Key | None) -> Key:
    """Step 2: the signature of a JWS that :func:`read_profiled_jws` returned.

    Args:
        jws: The parsed JWS.
        profile: Its profile.
        keys: The signer's trusted keys, or the one key known to be the signer's (a
            delegated key), or ``None`` for a profile whose key is the ``jwk`` header.

    Returns:
        The key that verified it.

    Raises:
        JWTRefusal: ``unknown_key`` (refetch the signer's keys once and retry),
            ``ambiguous_key``, ``key_does_not_fit`` or ``bad_signature``.
    """
    selected: tuple[Key, ...] | KeyProblem
    if profile.key_source is KeySource.HEADER_JWK:
        selected = (header_key(jws)[0],)
    elif keys is None:
        raise ValueError("this profile needs the signer's keys")
    elif isinstance(keys, Key):
        selected = (keys,) if key_fits_algorithm(keys, jws.alg) else KeyProblem.NO_FITTING_KEY
    else:
        kid = jws.header.get("kid")
        if kid is None and profile.kidless_tries_every_key:
            fitting = tuple(key for key in keys.keys if key_fits_algorithm(key, jws.alg))
            selected = fitting or KeyProblem.UNKNOWN_KID
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


def _check_audience(claims: Mapping[str, Any], rule: AudienceRule, audience: str | Collection[str] | None) -> None:
    if audience is None:
        raise ValueError("this profile needs the expected audience")
    if "aud" not in claims:
        raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, "aud")
    aud = claims["aud"]
    if rule is AudienceRule.ONE:
        if not isinstance(aud, str):
            raise JWTRefusal(JWTRefusalKind.AUDIENCE_NOT_ONE_STRING)
        if aud != audience:
            raise JWTRefusal(JWTRefusalKind.WRONG_AUDIENCE)
        return
    values = [aud] if isinstance(aud, str) else aud
    if not isinstance(values, list) or not values or not all(isinstance(value, str) for value in values):
        raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, "aud")
    accepted = (audience,) if isinstance(audience, str) else audience
    if not any(value in accepted for value in values):
        raise JWTRefusal(JWTRefusalKind.WRONG_AUDIENCE)


def _check_times(claims: Mapping[str, Any], profile: JWTProfile, *, now: int, skew: int) -> tuple[int, int]:
    """``exp`` and ``iat`` (step 3's times); ``exp`` is the window's end when absent."""
    has_exp = profile.exp_required or "exp" in claims
    exp = _time(claims, "exp", round_up=True) if has_exp else None
    iat = _time(claims, "iat")
    if exp is not None and profile.max_lifetime is not None and not 0 < exp - iat <= profile.max_lifetime:
        raise JWTRefusal(JWTRefusalKind.LIFETIME_TOO_LONG)
    if exp is not None and now >= exp + skew:
        raise JWTRefusal(JWTRefusalKind.EXPIRED)
    before, after = (None, skew) if profile.iat_window is None else profile.iat_window
    if iat > now + after:
        raise JWTRefusal(JWTRefusalKind.ISSUED_IN_FUTURE)
    if before is not None and iat < now - before:
        raise JWTRefusal(JWTRefusalKind.ISSUED_TOO_LONG_AGO)
    if "nbf" in claims:
        nbf = numeric_date(claims["nbf"])
        if nbf is None:
            raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, "nbf")
        if nbf > now + skew:
            raise JWTRefusal(JWTRefusalKind.NOT_YET_VALID)
    return iat, (iat + (before or 0) if exp is None else exp)


def check_profiled_claims(
    jws: CompactJWS,
    profile: JWTProfile,
    *,
    issuer: str | None,
    audience: str | Collection[str] | None,
    now: int,
    skew: int,
    key: Key | None = None,
    jkt: str | None = None,
    bindings: Sequence[ClaimBinding] = (),
) -> ProfiledJWT:
    """Steps 3 and 4: the claims of a JWS whose signature was checked.

    Args:
        jws: The verified JWS.
        profile: Its profile.
        issuer: What ``iss`` must equal (``None`` only for a profile without ``iss``).
        audience: What ``aud`` must be (one string, or the accepted values for
            :attr:`AudienceRule.ANY_OF`); ``None`` only for a profile that reads no ``aud``.
        now: The current time, seconds since the epoch.
        skew: Seconds of clock difference tolerated.
        key: The key that verified it, for the result.
        jkt: Its thumbprint when it came from the ``jwk`` header.
        bindings: The caller's request checks, run last in this order.

    Raises:
        JWTRefusal: For the first failed claim check, in the module docstring's order.
        ValueError: For an issuer or audience the profile needs and the caller did not give.
    """
    try:
        claims = jws.claims()
    except MalformedJWS:
        raise JWTRefusal(JWTRefusalKind.MALFORMED_CLAIMS) from None
    limit = profile.max_string_length
    if profile.issuer_required:
        if issuer is None:
            raise ValueError("this profile needs the expected issuer")
        if required_string(claims, "iss", max_length=limit) != issuer:
            raise JWTRefusal(JWTRefusalKind.WRONG_ISSUER)
    if profile.audience is not None:
        _check_audience(claims, profile.audience, audience)
    iat, exp = _check_times(claims, profile, now=now, skew=skew)
    jti = required_string(claims, "jti", max_length=limit)
    if not profile.jti_valid(jti):
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
    kid = jws.header.get("kid")
    verified = ProfiledJWT(
        claims=claims,
        jti=jti,
        iat=iat,
        exp=exp,
        kid=key.kid if key is not None else kid if isinstance(kid, str) else None,
        alg=jws.alg,
        key=key,
        jkt=jkt,
    )
    for binding in bindings:
        binding(verified)
    return verified


def verify_profiled_jwt(
    token: object,
    profile: JWTProfile,
    *,
    keys: KeySet | Key | None,
    issuer: str | None,
    audience: str | Collection[str] | None,
    now: int,
    skew: int,
    bindings: Sequence[ClaimBinding] = (),
    max_length: int | None = None,
) -> ProfiledJWT:
    """Verify ``token`` against ``profile``: header, signature, claims, then bindings.

    Args:
        token: The compact JWT as received.
        profile: What this kind of message requires.
        keys: The signer's trusted keys (never from the token), the one key known to be
            the signer's, or ``None`` for a profile whose key is the ``jwk`` header.
        issuer: What ``iss`` must equal (``None`` for a profile without ``iss``).
        audience: What ``aud`` must be (``None`` for a profile that reads no ``aud``).
        now: The current time, seconds since the epoch.
        skew: Seconds of clock difference tolerated (validated by the caller).
        bindings: The caller's request checks (:mod:`frontdoor_protocol.jwt_binding`).
        max_length: A longer token limit than the parser's default, if any.

    Returns:
        The verified claims and the times and ``jti`` the caller's replay check needs.

    Raises:
        JWTRefusal: The first failed check; ``unknown_key`` means refetch the keys once.
    """
    jws = read_profiled_jws(token, profile, max_length=max_length)
    jkt = None
    if profile.key_source is KeySource.HEADER_JWK:
        key, jkt = header_key(jws)
        if not signature_verifies(jws, key):
            raise JWTRefusal(JWTRefusalKind.BAD_SIGNATURE)
    else:
        key = check_profiled_signature(jws, profile, keys)
    return check_profiled_claims(
        jws, profile, issuer=issuer, audience=audience, now=now, skew=skew, key=key, jkt=jkt, bindings=bindings
    )
