"""Which key may verify a JWS, and the verification itself: shared by every JWT check.

The rules (PAP-4.3-20, GUIDE-jwt-01..03, RFC 8725 §3.1, §3.2):

- ``alg`` is a public-key algorithm the caller allows; never ``none`` or an HMAC, which
  an attacker could "sign" with a public key as the secret.
- The key must fit the algorithm: its ``kty`` and curve (``ES256`` needs an EC P-256 key,
  ``RS256`` an RSA key of at least 2048 bits), and its optional ``use``, ``key_ops`` and
  ``alg`` members must allow this use. An ``RS256`` header on an EC key is refused, never
  "tried".
- Keys come from the verifier's own source (a verified ``jwks_uri``, the issuer's keys),
  never from the token: ``jwk``, ``jku``, ``x5c`` and ``x5u`` headers are refused outright
  (GUIDE-jwt-03). DPoP proofs are the one exception and check their ``jwk`` themselves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from joserfc.errors import JoseError
from joserfc.jwk import ECKey, Key, KeySet, OKPKey, RSAKey
from joserfc.jws import JWSRegistry

from frontdoor_protocol.compact_jws import CompactJWS
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_algorithm import ASYMMETRIC_JWS_ALGORITHMS

__all__ = [
    "ALGORITHM_KEY_TYPES",
    "EMBEDDED_KEY_HEADERS",
    "MIN_RSA_KEY_BITS",
    "KeyProblem",
    "UnknownKeyId",
    "allowed_algorithms",
    "embeds_key",
    "key_fits_algorithm",
    "refusal",
    "select_verification_keys",
    "signature_verifies",
]

MIN_RSA_KEY_BITS: Final = 2048
"""Smallest RSA modulus accepted (GUIDE-jwt-01)."""

ALGORITHM_KEY_TYPES: Final[Mapping[str, tuple[str, frozenset[str]]]] = MappingProxyType(
    {
        "ES256": ("EC", frozenset({"P-256"})),  # RFC 7518 §3.4
        "ES384": ("EC", frozenset({"P-384"})),
        "ES512": ("EC", frozenset({"P-521"})),
        "RS256": ("RSA", frozenset()),  # RFC 7518 §3.3
        "RS384": ("RSA", frozenset()),
        "RS512": ("RSA", frozenset()),
        "PS256": ("RSA", frozenset()),  # RFC 7518 §3.5
        "PS384": ("RSA", frozenset()),
        "PS512": ("RSA", frozenset()),
        "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),  # RFC 8037 §3.1
        "Ed25519": ("OKP", frozenset({"Ed25519"})),  # RFC 9864 §2.2
    }
)
"""For each allowed ``alg``: the ``kty`` and, except for RSA, the curves that fit it."""

EMBEDDED_KEY_HEADERS: Final = frozenset({"jwk", "jku", "x5c", "x5u"})
"""Header members that carry or point to a key (RFC 7515 §4.1.2-§4.1.6)."""


class KeyProblem(StrEnum):
    """Why no key was selected (safe to log; names nothing from the input)."""

    UNKNOWN_KID = "unknown_kid"
    """No key has the header's ``kid``, or no ``kid`` and no key fits: refetch the JWKS."""
    NO_FITTING_KEY = "no_fitting_key"
    """Keys with the ``kid`` exist, but none fits the header's ``alg``."""
    AMBIGUOUS = "ambiguous"
    """No ``kid`` and several keys fit: the JWT must name its key."""


class UnknownKeyId(ProtocolError):
    """A refusal because no key matched; the caller may refetch the JWKS once and retry.

    It is an ordinary :class:`ProtocolError` with the code of the check that raised it
    (``invalid_client``, ``invalid_grant``, ``invalid_token``), so a caller that does not
    refetch answers correctly by letting it propagate (GUIDE-keys-02).
    """

    __slots__ = ()


def allowed_algorithms(algorithms: Collection[str]) -> frozenset[str]:
    """Validate a caller's algorithm allow-list.

    Args:
        algorithms: ``alg`` names the verifier accepts.

    Returns:
        The same names as a frozenset.

    Raises:
        ValueError: When the list is empty or names anything but a public-key algorithm.
    """
    chosen = frozenset(algorithms)
    if not chosen or not chosen <= ASYMMETRIC_JWS_ALGORITHMS:
        raise ValueError("allowed algorithms must be public-key JWS algorithms (PAP-4.3-20)")
    return chosen


def embeds_key(header: Mapping[str, Any]) -> bool:
    """Whether the header carries or references a key (GUIDE-jwt-03)."""
    return not EMBEDDED_KEY_HEADERS.isdisjoint(header)


def key_fits_algorithm(key: Key, alg: str) -> bool:
    """Whether ``key`` may verify a signature made with ``alg``.

    Args:
        key: A candidate key.
        alg: The header's ``alg``, already known to be allowed.

    Returns:
        ``True`` when the key type and curve fit, an RSA modulus has at least
        :data:`MIN_RSA_KEY_BITS`, and the key's ``use`` (if any) is ``sig``, its
        ``key_ops`` (if any) include ``verify`` and its ``alg`` (if any) is ``alg``.
    """
    fit = ALGORITHM_KEY_TYPES.get(alg)
    if fit is None:
        return False
    kty, curves = fit
    if key.key_type != kty:
        return False
    if isinstance(key, ECKey | OKPKey):
        if key.curve_name not in curves:
            return False
    elif isinstance(key, RSAKey):
        if key.public_key.key_size < MIN_RSA_KEY_BITS:
            return False
    else:
        return False
    use = key.get("use")
    if use is not None and use != "sig":
        return False
    key_ops = key.get("key_ops")
    if key_ops is not None and (not isinstance(key_ops, list) or "verify" not in key_ops):
        return False
    designed_alg = key.get("alg")
    return designed_alg is None or designed_alg == alg


def select_verification_keys(keys: KeySet, *, kid: str | None, alg: str) -> tuple[Key, ...] | KeyProblem:
    """The keys to try for a JWS, chosen by ``kid`` and ``alg`` (RFC 7515 §4.1.4).

    With a ``kid``, the keys bearing it that fit ``alg`` (a set may reuse a ``kid`` across
    key types, RFC 7517 §4.5). Without one, the only key that fits; several are ambiguous.

    Args:
        keys: The verifier's trusted keys.
        kid: The header's ``kid``, or ``None`` when absent.
        alg: The header's ``alg``.

    Returns:
        One or more keys to try, or why there is none.
    """
    if kid is not None:
        named = [key for key in keys.keys if key.kid == kid]
        if not named:
            return KeyProblem.UNKNOWN_KID
        fitting = tuple(key for key in named if key_fits_algorithm(key, alg))
        return fitting or KeyProblem.NO_FITTING_KEY
    fitting = tuple(key for key in keys.keys if key_fits_algorithm(key, alg))
    if not fitting:
        return KeyProblem.UNKNOWN_KID
    if len(fitting) > 1:
        return KeyProblem.AMBIGUOUS
    return fitting


def signature_verifies(jws: CompactJWS, key: Key) -> bool:
    """Whether ``jws`` carries a valid signature by ``key`` under its ``alg``.

    Args:
        jws: The parsed JWS; its ``alg`` must be one of :data:`ALGORITHM_KEY_TYPES`.
        key: A key that :func:`key_fits_algorithm` accepted for that ``alg``.

    Returns:
        ``False`` for a wrong, truncated or malformed signature; never raises for one.
    """
    alg = jws.alg
    if not key_fits_algorithm(key, alg):
        return False
    model = JWSRegistry.algorithms.get(alg)
    if model is None:
        return False
    try:
        return bool(model.verify(jws.signing_input, jws.signature, key))
    except (JoseError, ValueError, TypeError):
        return False


def refusal(code: ErrorCode, problem: KeyProblem, subject: str) -> ProtocolError:
    """The refusal for a key-selection problem, :class:`UnknownKeyId` when a refetch may help.

    Args:
        code: The check's error code.
        problem: Why no key was selected.
        subject: What was being verified, e.g. ``"client assertion"`` (Frontdoor's words).

    Returns:
        The error to raise.
    """
    if problem is KeyProblem.UNKNOWN_KID:
        return UnknownKeyId(code, f"{subject} key is unknown")
    if problem is KeyProblem.AMBIGUOUS:
        return ProtocolError(code, f"{subject} must name its key with kid")
    return ProtocolError(code, f"{subject} alg does not fit its key")
