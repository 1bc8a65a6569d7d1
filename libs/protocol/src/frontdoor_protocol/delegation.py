"""PAP 1.0 delegations: the agent's identity key vouching for a short-lived delegated key.

A delegation is the compact JWS carried in the ``poppy_dlg`` header of every
``Poppy-Session`` JWT [S §3]. Checks, in order (ADR 0004 §3 step 4), each refused with
``invalid_session`` and a fixed description:

1. One strict compact JWS; ``typ`` is ``poppy-delegation+jwt``; no ``jwk``, ``jku``,
   ``x5u``, ``x5c`` or ``crit`` header; ``kid`` a string.
2. ``alg`` is ES256 or PS384 and the identity key chosen by ``kid`` fits it (an EC P-256
   key for ES256, an RSA key of at least 2048 bits for PS384). A ``kid`` that no identity
   key has raises :class:`UnknownAgentKeyId`: the caller reloads the agent's keys once.
3. The signature, by that identity key.
4. Claims (strict JSON, duplicate members refused): ``iss`` is the client; ``cnf.jwk`` an
   EC P-256 public key without ``d`` (nor any private member); ``iat`` and ``exp``
   present, ``0 < exp - iat <= 24 h``, not expired, ``iat`` not in the future beyond the
   skew; ``jti`` present. ``sub``, ``aud``, ``sid`` and ``agent_id`` are refused: a
   delegation names no user, company or agent [S §3; Q5].

Steps 1 to 4 are a :mod:`frontdoor_protocol.jwt_profile` profile (typ exact, kid required,
the identity key set, ``iss``, no ``aud`` read, lifetime, skew, ``jti``, ``cnf`` required,
the forbidden claims; the profile checks the times before ``cnf`` and the forbidden
claims); ``cnf.jwk`` is imported as a carried public key (:mod:`frontdoor_protocol.public_jwk`,
RFC 7800 §3.2). Every description is unchanged, one table from refusal kind to words.

The same delegation arrives on every request of an agent for up to 24 hours. A
:class:`DelegationCache`, owned by the caller and passed in, remembers what cannot change
once a delegation verified: its parse, the imported ``cnf.jwk`` and its thumbprint, ``iss``,
``iat``, ``exp`` and ``jti``. It is keyed by the exact compact string, and an entry is used
only while the identity key that ``kid`` selects now is the one that verified it (same
RFC 7638 thumbprint): a key rotated or removed in the agent's JWKS is a miss (or
:class:`UnknownAgentKeyId`). The checks that depend on the request or the time still run
on every call: ``kid`` and ``alg`` against the current identity keys, ``iss`` against the
Session JWT's ``iss``, expiry and ``iat`` against ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec
from joserfc.jwk import ECKey, Key, KeySet, RSAKey

from frontdoor_protocol.bounded_cache import BoundedLRU
from frontdoor_protocol.compact_jws import CompactJWS, sign_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_verification import (
    KeyProblem,
    UnknownKeyId,
    select_verification_keys,
    signature_verifies,
)
from frontdoor_protocol.jwt_assertion import DEFAULT_CLOCK_SKEW
from frontdoor_protocol.jwt_claims import MAX_JTI_LENGTH
from frontdoor_protocol.jwt_profile import ClaimRule, JWTProfile, check_profiled_claims, read_profiled_jws
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind
from frontdoor_protocol.public_jwk import PRIVATE_JWK_MEMBERS, PublicJWKProblem, import_public_jwk

__all__ = [
    "DELEGATION_ALGORITHMS",
    "DELEGATION_FORBIDDEN_CLAIMS",
    "DELEGATION_TYPE",
    "DEFAULT_DELEGATION_CACHE_SIZE",
    "MAX_DELEGATION_LIFETIME",
    "DelegationCache",
    "UnknownAgentKeyId",
    "VerifiedDelegation",
    "mint_delegation",
    "parse_delegation",
    "verify_delegation",
]

DELEGATION_TYPE: Final = "poppy-delegation+jwt"
"""The ``typ`` of a delegation [S §3]."""
MAX_DELEGATION_LIFETIME: Final = 86400
"""Most seconds from a delegation's ``iat`` to its ``exp``: 24 hours [S §3]."""
DELEGATION_ALGORITHMS: Final = frozenset({"ES256", "PS384"})
"""ES256 (required) and PS384 (recommended) [S §3]."""
DELEGATION_FORBIDDEN_CLAIMS: Final = frozenset({"sub", "aud", "sid", "agent_id"})
"""A delegation carries no User ID, company identifier, Session or Agent ID [S §3; Q5]."""
DELEGATED_KEY_CURVE: Final = "P-256"
DEFAULT_DELEGATION_CACHE_SIZE: Final = 10_000
"""Delegations a :class:`DelegationCache` holds by default (one per active agent instance)."""

_INVALID = ErrorCode.INVALID_SESSION
_K = JWTRefusalKind


def _is_delegation_jti(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_JTI_LENGTH


_PROFILE: Final = JWTProfile(
    types=frozenset({DELEGATION_TYPE}),
    typ_exact=True,
    algorithms=DELEGATION_ALGORITHMS,
    kid_required=True,
    audience=None,  # forbidden below: a delegation names no company
    max_lifetime=MAX_DELEGATION_LIFETIME,
    required=(ClaimRule("cnf", lambda value: isinstance(value, dict)),),
    forbidden=tuple(sorted(DELEGATION_FORBIDDEN_CLAIMS)),
    jti_valid=_is_delegation_jti,
)
_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    _K.MALFORMED: "is not a compact JWS",
    _K.WRONG_TYPE: "typ is not poppy-delegation+jwt",
    _K.ALGORITHM_NOT_ACCEPTED: "alg is not accepted",
    _K.EMBEDDED_KEY: "header must not carry a key",
    _K.MISSING_KID: "has no kid",
    _K.MALFORMED_KID: "has no kid",
    _K.MALFORMED_CLAIMS: "claims are not a JSON object",
    _K.WRONG_ISSUER: "iss is not the client",
    _K.FORBIDDEN_CLAIM: "must not name a user, company, Session or agent",
    _K.LIFETIME_TOO_LONG: "lifetime is over 24 hours",
    _K.EXPIRED: "has expired",
    _K.ISSUED_IN_FUTURE: "is issued in the future",
    _K.NOT_YET_VALID: "is not valid yet",
}
"""What each refused check says after "the delegation" (stable descriptions)."""
_CLAIM_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "iss": "iss is not the client",
    "iat": "iat or exp is missing",
    "exp": "iat or exp is missing",
    "nbf": "is not valid yet",
    "jti": "jti is missing",
    "cnf": "cnf is missing",
}


class UnknownAgentKeyId(UnknownKeyId):
    """``invalid_session``: no identity key of the agent has the delegation's ``kid``.

    The caller reloads the agent's keys (its ``jwks_uri``) once and retries; letting it
    propagate answers ``invalid_session`` correctly. A subclass of :class:`UnknownKeyId`
    so a caller can tell it from the issuer's unknown ``kid`` (``invalid_token``).
    """

    __slots__ = ()


class VerifiedDelegation(msgspec.Struct, frozen=True, kw_only=True):
    """A delegation whose signature and claims passed every check.

    Attributes:
        client_id: Its ``iss``: the agent's Client ID.
        jti: Its ``jti``.
        iat: Issued at, whole seconds.
        exp: Expiry, whole seconds.
        key: The delegated public key (``cnf.jwk``), imported.
        jkt: RFC 7638 thumbprint of the delegated key.
        alg: The algorithm the identity key signed with.
    """

    client_id: str
    jti: str
    iat: int
    exp: int
    key: Key
    jkt: str
    alg: str


def _refuse(description: str) -> ProtocolError:
    return ProtocolError(_INVALID, description)


def parse_delegation(value: object) -> CompactJWS:
    """Parse a ``poppy_dlg`` value and check its header (steps 1 and the ``alg`` of 2).

    Args:
        value: The ``poppy_dlg`` header member, unverified.

    Returns:
        The parsed delegation, not verified.

    Raises:
        ProtocolError: ``invalid_session``.
    """
    try:
        return read_profiled_jws(value, _PROFILE)
    except JWTRefusal as refused:
        raise _error(refused) from None


def _error(refused: JWTRefusal) -> ProtocolError:
    if refused.claim is not None and refused.kind is not _K.FORBIDDEN_CLAIM:
        words = _CLAIM_DESCRIPTIONS.get(refused.claim, "claims are not accepted")
    else:
        words = _DESCRIPTIONS.get(refused.kind, "is not accepted")
    return _refuse(f"the delegation {words}")


_CNF_PROBLEMS: Final[Mapping[PublicJWKProblem, str]] = {
    PublicJWKProblem.MISSING: "the delegation cnf.jwk is not a JWK object",
    PublicJWKProblem.PRIVATE: "the delegation cnf.jwk must hold a public key only",
    PublicJWKProblem.INVALID: "the delegated key is not a valid key",
    PublicJWKProblem.DOES_NOT_FIT: "the delegation cnf.jwk must hold a public key only",  # private after import
}


def _delegated_key(cnf: Mapping[str, object]) -> tuple[Key, str]:
    """``cnf.jwk`` (RFC 7800 §3.2): an EC P-256 public key, and its RFC 7638 thumbprint."""
    jwk = cnf.get("jwk")
    if not isinstance(jwk, dict):
        raise _refuse(_CNF_PROBLEMS[PublicJWKProblem.MISSING])
    if not PRIVATE_JWK_MEMBERS.isdisjoint(jwk):
        raise _refuse(_CNF_PROBLEMS[PublicJWKProblem.PRIVATE])
    if jwk.get("kty") != "EC" or jwk.get("crv") != DELEGATED_KEY_CURVE:
        raise _refuse("the delegated key is not an EC P-256 key")
    imported = import_public_jwk(jwk)
    if isinstance(imported, PublicJWKProblem):
        raise _refuse(_CNF_PROBLEMS[imported])
    return imported


def verify_delegation(
    jws: CompactJWS,
    *,
    client_id: str,
    identity_keys: KeySet,
    now: int,
    skew: int = DEFAULT_CLOCK_SKEW,
) -> VerifiedDelegation:
    """Verify a delegation parsed by :func:`parse_delegation` (steps 2 to 4).

    Args:
        jws: The parsed delegation.
        client_id: The agent's Client ID (the Session JWT's ``iss``, whose keys these are).
        identity_keys: The agent's identity keys from its verified ``jwks_uri``.
        now: The current time, in seconds since the epoch.
        skew: Seconds of clock difference tolerated on ``iat`` and ``exp``.

    Returns:
        The delegated key and the delegation's times.

    Raises:
        UnknownAgentKeyId: ``invalid_session``; no identity key has the ``kid``.
        ProtocolError: ``invalid_session`` for every other failed check.
    """
    _, delegation = _verify(jws, _identity_keys_for(jws, identity_keys), client_id=client_id, now=now, skew=skew)
    return delegation


def _identity_keys_for(jws: CompactJWS, identity_keys: KeySet) -> tuple[Key, ...]:
    selected = select_verification_keys(identity_keys, kid=str(jws.header["kid"]), alg=jws.alg)
    if selected is KeyProblem.UNKNOWN_KID:
        raise UnknownAgentKeyId(_INVALID, "the delegation key is unknown")
    if isinstance(selected, KeyProblem):
        raise _refuse("the delegation alg does not fit its key")
    return selected


def _verify(
    jws: CompactJWS, selected: tuple[Key, ...], *, client_id: str, now: int, skew: int
) -> tuple[Key, VerifiedDelegation]:
    """The identity key whose signature verified, and the checked delegation."""
    signer = next((key for key in selected if signature_verifies(jws, key)), None)
    if signer is None:
        raise _refuse("the delegation signature is invalid")
    try:
        verified = check_profiled_claims(jws, _PROFILE, issuer=client_id, audience=None, now=now, skew=skew)
    except JWTRefusal as refused:
        raise _error(refused) from None
    key, jkt = _delegated_key(verified.claims["cnf"])
    delegation = VerifiedDelegation(
        client_id=client_id, jti=verified.jti, iat=verified.iat, exp=verified.exp, key=key, jkt=jkt, alg=jws.alg
    )
    return signer, delegation


def _check_times(delegation: VerifiedDelegation, *, client_id: str, now: int, skew: int) -> None:
    """What may change between two requests bearing one delegation: the client it is used for, and time."""
    if delegation.client_id != client_id:
        raise _refuse("the delegation iss is not the client")
    if now >= delegation.exp + skew:
        raise _refuse("the delegation has expired")
    if delegation.iat > now + skew:
        raise _refuse("the delegation is issued in the future")


class _Remembered(msgspec.Struct, frozen=True, kw_only=True):
    jws: CompactJWS
    identity: Key
    identity_jkt: str
    delegation: VerifiedDelegation


def _key_thumbprint(key: Key) -> str:
    return key.thumbprint()  # RFC 7638, joserfc's key API


class DelegationCache:
    """Delegations that verified, remembered by their exact compact string (see the module docstring).

    The caller owns one per process (or per verifier) and passes it to
    :func:`~frontdoor_protocol.delegated_session.parse_poppy_session` and
    :func:`~frontdoor_protocol.delegated_session.verify_poppy_session` (or the
    ``delegated_request`` functions). Nothing that failed a check is stored. Bounded: past
    ``maxsize`` the least recently used delegation is dropped.

    Args:
        maxsize: The most delegations held.

    Raises:
        ValueError: For ``maxsize < 1``.
    """

    __slots__ = ("_entries",)

    def __init__(self, maxsize: int = DEFAULT_DELEGATION_CACHE_SIZE) -> None:
        self._entries: BoundedLRU[str, _Remembered] = BoundedLRU(maxsize)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def maxsize(self) -> int:
        """The most delegations held."""
        return self._entries.maxsize

    def __contains__(self, compact: object) -> bool:
        return compact in self._entries

    def parsed(self, compact: str) -> CompactJWS | None:
        """The parse of a delegation that verified before, or ``None`` (then parse it)."""
        entry = self._entries.get(compact)
        return None if entry is None else entry.jws

    def verify(
        self,
        compact: str,
        jws: CompactJWS,
        *,
        client_id: str,
        identity_keys: KeySet,
        now: int,
        skew: int = DEFAULT_CLOCK_SKEW,
    ) -> VerifiedDelegation:
        """:func:`verify_delegation`, skipping the signature and claims work for a delegation seen before.

        Args:
            compact: The delegation exactly as received (the ``poppy_dlg`` value).
            jws: Its parse (:meth:`parsed` or :func:`parse_delegation`).
            client_id: The Session JWT's ``iss``.
            identity_keys: The agent's identity keys now.
            now: The current time, in seconds since the epoch.
            skew: Seconds of clock difference tolerated on ``iat`` and ``exp``.

        Returns:
            The verified delegation.

        Raises:
            UnknownAgentKeyId: ``invalid_session``; no identity key has the ``kid`` (any more).
            ProtocolError: ``invalid_session`` for every other failed check, cached or not.
        """
        selected = _identity_keys_for(jws, identity_keys)
        entry = self._entries.get(compact)
        if entry is not None:
            for key in selected:
                if key is entry.identity or _key_thumbprint(key) == entry.identity_jkt:
                    _check_times(entry.delegation, client_id=client_id, now=now, skew=skew)
                    if key is not entry.identity:  # the JWKS was re-imported: the next hit is by identity
                        self._entries.put(compact, msgspec.structs.replace(entry, identity=key))
                    return entry.delegation
        signer, delegation = _verify(jws, selected, client_id=client_id, now=now, skew=skew)
        self._entries.put(
            compact, _Remembered(jws=jws, identity=signer, identity_jkt=_key_thumbprint(signer), delegation=delegation)
        )
        return delegation


def mint_delegation(
    *,
    identity_key: ECKey | RSAKey,
    kid: str,
    client_id: str,
    delegated_key: Key,
    iat: int,
    exp: int,
    jti: str,
    alg: str = "ES256",
) -> str:
    """Sign a delegation as an agent does (for tests and benchmarks; Frontdoor never signs one).

    Args:
        identity_key: The agent's private identity key (P-256 for ES256, RSA for PS384).
        kid: Its ``kid`` in the agent's JWKS.
        client_id: The agent's Client ID (``iss``).
        delegated_key: The delegated key; only its public members are published in ``cnf.jwk``.
        iat: Issued at.
        exp: Expiry, at most :data:`MAX_DELEGATION_LIFETIME` after ``iat``.
        jti: A unique, unguessable ID.
        alg: ``ES256`` or ``PS384``.

    Returns:
        The compact delegation, the ``poppy_dlg`` of a Session JWT.

    Raises:
        ValueError: For an algorithm other than ES256/PS384 or a lifetime over 24 hours.
    """
    if alg not in DELEGATION_ALGORITHMS:
        raise ValueError("a delegation is signed with ES256 or PS384")
    if not 0 < exp - iat <= MAX_DELEGATION_LIFETIME:
        raise ValueError("a delegation lives between 1 second and 24 hours")
    public_jwk = delegated_key.as_dict(private=False)
    header = {"alg": alg, "typ": DELEGATION_TYPE, "kid": kid}
    claims = {"iss": client_id, "cnf": {"jwk": public_jwk}, "iat": iat, "exp": exp, "jti": jti}
    return sign_compact_jws(header, claims, identity_key)
