"""DPoP proofs (RFC 9449 §4.3; PAP-4.3-02..07, -19..21): verification of one ``DPoP`` header.

Checks, in order, each refused with ``invalid_dpop_proof``:

1. One well-formed compact JWS (PAP-4.3-19; the caller refuses a second ``DPoP`` header).
2. ``typ`` is ``dpop+jwt``; ``alg`` is a public-key algorithm the company accepts, never
   ``none`` or an HMAC (PAP-4.3-20, GUIDE-co-dpop-01); no ``jku``/``x5c``/``x5u``.
3. ``jwk`` is a public key, with no private member, whose type and curve fit ``alg``
   (PAP-4.3-20), and the signature verifies with it (PAP-4.3-02).
4. ``jti``, ``htm``, ``htu`` and ``iat`` are present; ``htm`` is the request method and
   ``htu`` the request URI without query or fragment (PAP-4.3-04); ``iat`` is within the
   acceptance window (PAP-4.3-05).
5. ``ath``: absent at the token endpoint (no access token), else the base64url SHA-256 of
   the access token (PAP-4.3-07); the key's thumbprint is the token's ``cnf.jkt``
   (PAP-4.3-03).
6. Last, so that only an otherwise valid proof is asked to retry: the ``nonce``, refused
   with ``use_dpop_nonce`` when one is required and missing or not one the company issued
   (PAP-4.3-21, RFC 9449 §8, §9).

Replay is the caller's: it stores ``(jkt, jti)`` until :attr:`DPoPProof.accept_until`
(PAP-4.3-06 at the token endpoint, in a cache every replica shares).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Collection, Mapping
from typing import Any, Final

import msgspec
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry, Key

from frontdoor_protocol.base64url import b64url_encode
from frontdoor_protocol.bounded_cache import BoundedLRU
from frontdoor_protocol.compact_jws import MalformedJWS, parse_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.http_target_uri import htu_normalize
from frontdoor_protocol.jwk_thumbprint import jwk_thumbprint
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM
from frontdoor_protocol.jws_verification import (
    EMBEDDED_KEY_HEADERS,
    allowed_algorithms,
    key_fits_algorithm,
    signature_verifies,
)
from frontdoor_protocol.jwt_claims import is_jwt_id, numeric_date

__all__ = [
    "DEFAULT_DPOP_IAT_WINDOW",
    "DPOP_TYPE",
    "PRIVATE_JWK_MEMBERS",
    "DPoPProof",
    "access_token_hash",
    "verify_dpop_proof",
]

DPOP_TYPE: Final = "dpop+jwt"
DEFAULT_DPOP_IAT_WINDOW: Final = (60, 60)
"""Seconds a proof's ``iat`` may be before and after now: "such as one minute" (PAP-4.3-05)."""
PRIVATE_JWK_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
"""JWK members that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4)."""
_MAX_NONCE_LENGTH: Final = 512

_INVALID = ErrorCode.INVALID_DPOP_PROOF
_KEY_HEADERS: Final = EMBEDDED_KEY_HEADERS - {"jwk"}


class DPoPProof(msgspec.Struct, frozen=True, kw_only=True):
    """A verified DPoP proof.

    Attributes:
        jkt: RFC 7638 thumbprint of the proof's key: the ``cnf.jkt`` to bind a new token to.
        jti: The proof's ``jti``, for the caller's replay cache.
        iat: ``iat``, whole seconds.
        htm: The HTTP method it was made for.
        htu: The URI it was made for, as sent.
        nonce: The ``nonce`` it carried, if any.
        alg: Its signature algorithm.
        accept_until: The last second it is accepted: keep ``(jkt, jti)`` in the replay
            cache until then.
    """

    jkt: str
    jti: str
    iat: int
    htm: str
    htu: str
    nonce: str | None
    alg: str
    accept_until: int


def access_token_hash(access_token: str) -> str:
    """The ``ath`` of a proof sent with ``access_token`` (RFC 9449 §4.2).

    Args:
        access_token: The token exactly as sent in ``Authorization``.

    Returns:
        base64url SHA-256 of its ASCII bytes.

    Raises:
        ValueError: When the token is not ASCII (an RFC 6750 ``b64token`` always is).
    """
    return b64url_encode(hashlib.sha256(access_token.encode("ascii")).digest())


# An agent proves with the same key on every request: importing a JWK and hashing its
# thumbprint is a third of a resource check's CPU, so the verified result is remembered
# per (exact key members, alg). A pure function of its key, so one process-wide bounded
# LRU serves every caller (the delegation cache of PAP 1.0 is the same BoundedLRU, owned
# by its caller because its hits depend on the caller's identity keys).
_KEY_CACHE_MAX: Final = 4096
_KEY_CACHE: Final[BoundedLRU[tuple[tuple[tuple[str, str], ...], str], tuple[Key, str]]] = BoundedLRU(_KEY_CACHE_MAX)


def _public_key(jwk: object, alg: str) -> tuple[Key, str]:
    """The proof key and its thumbprint, or a refusal (PAP-4.3-20)."""
    if not isinstance(jwk, dict):
        raise ProtocolError(_INVALID, "DPoP proof jwk is missing")
    if not PRIVATE_JWK_MEMBERS.isdisjoint(jwk):
        raise ProtocolError(_INVALID, "DPoP proof jwk must hold a public key only")
    cache_key = None
    if all(isinstance(k, str) and isinstance(v, str) for k, v in jwk.items()):
        cache_key = (tuple(sorted(jwk.items())), alg)
        hit = _KEY_CACHE.get(cache_key)
        if hit is not None:
            return hit
    result = _import_public_key(jwk, alg)
    if cache_key is not None:
        _KEY_CACHE.put(cache_key, result)
    return result


def _import_public_key(jwk: dict[str, Any], alg: str) -> tuple[Key, str]:
    try:
        key = JWKRegistry.import_key(jwk)
        thumbprint = jwk_thumbprint(jwk)
    except (JoseError, ValueError, TypeError, KeyError):
        raise ProtocolError(_INVALID, "DPoP proof jwk is not a valid key") from None
    if key.is_private or not key_fits_algorithm(key, alg):
        raise ProtocolError(_INVALID, "DPoP proof jwk does not fit its alg")
    return key, thumbprint


def _normalized_nonces(nonce: str | Collection[str] | None, require_nonce: bool) -> frozenset[str]:
    if nonce is None:
        accepted: frozenset[str] = frozenset()
    elif isinstance(nonce, str):
        accepted = frozenset({nonce})
    else:
        accepted = frozenset(nonce)
    if require_nonce and not accepted:
        raise ValueError("require_nonce needs the nonces the company issued")
    return accepted


def _same(received: str, expected: str) -> bool:
    # Constant time, and safe for non-ASCII text (compare_digest refuses non-ASCII str).
    return hmac.compare_digest(received.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def _string_claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value:
        raise ProtocolError(_INVALID, f"DPoP proof {name} is missing")
    return value


def verify_dpop_proof(
    proof: str,
    *,
    method: str,
    url: str,
    now: int,
    access_token: str | None,
    expected_jkt: str | None = None,
    nonce: str | Collection[str] | None = None,
    require_nonce: bool = False,
    iat_window: tuple[int, int] = DEFAULT_DPOP_IAT_WINDOW,
    allowed_algs: Collection[str] = (REQUIRED_DPOP_ALGORITHM,),
) -> DPoPProof:
    """Verify a DPoP proof for one request; see the module docstring for the checks.

    Args:
        proof: The ``DPoP`` header value (the only one the request has).
        method: The request method, e.g. ``"POST"``; compared exactly.
        url: The request's target URI as the company serves it (its public scheme, host
            and path); any query or fragment is ignored.
        now: The current time, in seconds since the epoch.
        access_token: The token sent in ``Authorization`` at a resource, or ``None`` at
            the token endpoint, where the proof must have no ``ath``.
        expected_jkt: The token's ``cnf.jkt`` (or the Session's bound key on renewal);
            ``None`` when no key is bound yet.
        nonce: The nonce (or nonces, during rotation) the company issued and accepts.
        require_nonce: Whether a proof without an accepted nonce is refused with
            ``use_dpop_nonce``. Without it, a proof whose nonce is not accepted is still
            refused so, and one without a nonce is accepted.
        iat_window: Seconds ``iat`` may be before and after ``now``.
        allowed_algs: The ``dpop_signing_alg_values_supported`` the company lists.

    Returns:
        The proof's key thumbprint, ``jti``, times and nonce.

    Raises:
        ProtocolError: ``invalid_dpop_proof``, or ``use_dpop_nonce`` for the nonce.
        ValueError: For bad arguments: a ``url`` that is not an absolute http(s) URL, an
            algorithm that is not public-key, a negative window, ``require_nonce``
            without a nonce.
    """
    allowed = allowed_algorithms(allowed_algs)
    accepted_nonces = _normalized_nonces(nonce, require_nonce)
    before, after = iat_window
    if before < 0 or after < 0:
        raise ValueError("iat_window values must be non-negative")
    request_htu = htu_normalize(url)
    try:
        jws = parse_compact_jws(proof)
    except MalformedJWS:
        raise ProtocolError(_INVALID, "DPoP proof is not one compact JWS") from None
    header = jws.header
    if header.get("typ") != DPOP_TYPE:
        raise ProtocolError(_INVALID, "DPoP proof typ must be dpop+jwt")
    if jws.alg not in allowed:
        raise ProtocolError(_INVALID, "DPoP proof alg is not accepted")
    if not _KEY_HEADERS.isdisjoint(header):
        raise ProtocolError(_INVALID, "DPoP proof key must be in jwk only")
    key, jkt = _public_key(header.get("jwk"), jws.alg)
    if not signature_verifies(jws, key):
        raise ProtocolError(_INVALID, "DPoP proof signature is invalid")
    try:
        claims = jws.claims()
    except MalformedJWS:
        raise ProtocolError(_INVALID, "DPoP proof claims are not a JSON object") from None

    jti = claims.get("jti")
    if not is_jwt_id(jti):
        raise ProtocolError(_INVALID, "DPoP proof jti is missing or too short")
    htm = _string_claim(claims, "htm")
    if htm != method:
        raise ProtocolError(_INVALID, "DPoP proof htm does not match the request")
    htu = _string_claim(claims, "htu")
    if "?" in htu or "#" in htu:
        # RFC 9449 §4.2: htu is the target URI "without query and fragment parts".
        raise ProtocolError(_INVALID, "DPoP proof htu must have no query or fragment")
    try:
        matches = htu_normalize(htu) == request_htu
    except ValueError:
        matches = False
    if not matches:
        raise ProtocolError(_INVALID, "DPoP proof htu does not match the request")
    iat = numeric_date(claims.get("iat"))
    if iat is None:
        raise ProtocolError(_INVALID, "DPoP proof iat is missing")
    if not now - before <= iat <= now + after:
        raise ProtocolError(_INVALID, "DPoP proof iat is outside the acceptance window")

    ath = claims.get("ath")
    if access_token is None:
        if "ath" in claims:
            raise ProtocolError(_INVALID, "DPoP proof must not have ath at the token endpoint")
    elif not isinstance(ath, str) or not access_token.isascii() or not _same(ath, access_token_hash(access_token)):
        raise ProtocolError(_INVALID, "DPoP proof ath does not match the access token")
    if expected_jkt is not None and not _same(jkt, expected_jkt):
        raise ProtocolError(_INVALID, "DPoP proof key is not the one the token is bound to")

    carried = claims.get("nonce")
    if carried is not None and (not isinstance(carried, str) or not 0 < len(carried) <= _MAX_NONCE_LENGTH):
        raise ProtocolError(_INVALID, "DPoP proof nonce is malformed")
    if carried is None:
        if require_nonce:
            raise ProtocolError(ErrorCode.USE_DPOP_NONCE, "DPoP proof must carry the server nonce")
    elif accepted_nonces and carried not in accepted_nonces:
        raise ProtocolError(ErrorCode.USE_DPOP_NONCE, "DPoP proof nonce is not current")
    return DPoPProof(jkt=jkt, jti=jti, iat=iat, htm=htm, htu=htu, nonce=carried, alg=jws.alg, accept_until=iat + before)
