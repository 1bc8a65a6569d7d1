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

The proof is a :mod:`frontdoor_protocol.jwt_profile` profile: key from the ``jwk`` header,
no ``iss``/``aud``/``exp``, ``iat`` inside the window, ``jti``/``htm``/``htu`` required, then
the bindings of :mod:`frontdoor_protocol.jwt_binding` (request, ``ath``, ``cnf.jkt``);
``iat`` is checked before ``jti`` and ``htm`` (the profile's order). The descriptions are
stable public API, one table from refusal kind (and claim) to words.

Replay is the caller's: it stores ``(jkt, jti)`` until :attr:`DPoPProof.accept_until`
(PAP-4.3-06 at the token endpoint, in a cache every replica shares).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Final

import msgspec

from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM
from frontdoor_protocol.jws_verification import allowed_algorithms
from frontdoor_protocol.jwt_binding import access_token_binding, access_token_hash, key_binding, request_binding
from frontdoor_protocol.jwt_profile import ClaimRule, JWTProfile, KeySource, verify_profiled_jwt
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind
from frontdoor_protocol.public_jwk import PRIVATE_JWK_MEMBERS

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
_MAX_NONCE_LENGTH: Final = 512

_INVALID = ErrorCode.INVALID_DPOP_PROOF
_K = JWTRefusalKind


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


@lru_cache(maxsize=32)
def _profile(algorithms: frozenset[str], iat_window: tuple[int, int]) -> JWTProfile:
    """RFC 9449 §4.2-§4.3 as a profile: typ exactly dpop+jwt, the key in jwk, no iss/aud/exp."""
    return JWTProfile(
        types=frozenset({DPOP_TYPE}),
        typ_exact=True,
        algorithms=allowed_algorithms(algorithms),
        key_source=KeySource.HEADER_JWK,
        issuer_required=False,
        audience=None,
        exp_required=False,
        max_lifetime=None,
        iat_window=iat_window,
        required=(ClaimRule("htm"), ClaimRule("htu")),
    )


_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    _K.MALFORMED: "is not one compact JWS",
    _K.WRONG_TYPE: "typ must be dpop+jwt",
    _K.ALGORITHM_NOT_ACCEPTED: "alg is not accepted",
    _K.EMBEDDED_KEY: "key must be in jwk only",
    _K.MALFORMED_KID: "is not one compact JWS",
    _K.HEADER_KEY_MISSING: "jwk is missing",
    _K.HEADER_KEY_PRIVATE: "jwk must hold a public key only",
    _K.HEADER_KEY_INVALID: "jwk is not a valid key",
    _K.KEY_DOES_NOT_FIT: "jwk does not fit its alg",
    _K.BAD_SIGNATURE: "signature is invalid",
    _K.MALFORMED_CLAIMS: "claims are not a JSON object",
    _K.ISSUED_IN_FUTURE: "iat is outside the acceptance window",
    _K.ISSUED_TOO_LONG_AGO: "iat is outside the acceptance window",
    _K.NOT_YET_VALID: "iat is outside the acceptance window",
    _K.EXPIRED: "iat is outside the acceptance window",
    _K.KEY_NOT_BOUND: "key is not the one the token is bound to",
}
"""What each refused check says after "DPoP proof" (stable descriptions)."""
_CLAIM_DESCRIPTIONS: Final[Mapping[tuple[JWTRefusalKind, str], str]] = {
    (_K.INVALID_CLAIM, "jti"): "jti is missing or too short",
    (_K.MISSING_CLAIM, "jti"): "jti is missing or too short",
    (_K.CLAIM_MISMATCH, "htm"): "htm does not match the request",
    (_K.INVALID_CLAIM, "htu"): "htu must have no query or fragment",
    (_K.CLAIM_MISMATCH, "htu"): "htu does not match the request",
    (_K.FORBIDDEN_CLAIM, "ath"): "must not have ath at the token endpoint",
    (_K.MISSING_CLAIM, "ath"): "ath does not match the access token",
    (_K.CLAIM_MISMATCH, "ath"): "ath does not match the access token",
}
"""A claim problem by (kind, claim); any other missing or invalid claim "is missing"."""


def _error(refused: JWTRefusal) -> ProtocolError:
    if refused.claim is None:
        return ProtocolError(_INVALID, f"DPoP proof {_DESCRIPTIONS.get(refused.kind, 'is not accepted')}")
    words = _CLAIM_DESCRIPTIONS.get((refused.kind, refused.claim), f"{refused.claim} is missing")
    return ProtocolError(_INVALID, f"DPoP proof {words}")


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
    accepted_nonces = _normalized_nonces(nonce, require_nonce)
    before, after = iat_window
    if before < 0 or after < 0:
        raise ValueError("iat_window values must be non-negative")
    profile = _profile(frozenset(allowed_algs), (before, after))
    bindings = (request_binding(method, url), access_token_binding(access_token), key_binding(expected_jkt))
    try:
        verified = verify_profiled_jwt(
            proof, profile, keys=None, issuer=None, audience=None, now=now, skew=0, bindings=bindings
        )
    except JWTRefusal as refused:
        raise _error(refused) from None
    claims = verified.claims
    carried = claims.get("nonce")
    if carried is not None and (not isinstance(carried, str) or not 0 < len(carried) <= _MAX_NONCE_LENGTH):
        raise ProtocolError(_INVALID, "DPoP proof nonce is malformed")
    if carried is None:
        if require_nonce:
            raise ProtocolError(ErrorCode.USE_DPOP_NONCE, "DPoP proof must carry the server nonce")
    elif accepted_nonces and carried not in accepted_nonces:
        raise ProtocolError(ErrorCode.USE_DPOP_NONCE, "DPoP proof nonce is not current")
    assert verified.jkt is not None  # a HEADER_JWK profile always has the key's thumbprint
    return DPoPProof(
        jkt=verified.jkt,
        jti=verified.jti,
        iat=verified.iat,
        htm=claims["htm"],
        htu=claims["htu"],
        nonce=carried,
        alg=verified.alg,
        accept_until=verified.iat + before,
    )
