"""Bindings of a verified JWT to the request it came with: typed hooks for the profile verifier.

A proof-of-possession JWT is only worth something tied to one request: a DPoP proof
(RFC 9449 §4.3) and a PAP 1.0 ``Poppy-Session`` JWT [S §3] name the request's method and
URI (``htm``, ``htu``; PAP-4.3-04), the access token sent with it (``ath``; PAP-4.3-07)
and are signed by the key the token is bound to (``cnf.jkt``; PAP-4.3-03). Each function
here returns a :data:`~frontdoor_protocol.jwt_profile.ClaimBinding` that
:func:`~frontdoor_protocol.jwt_profile.verify_profiled_jwt` runs after the profile's own
claims, raising :class:`~frontdoor_protocol.jwt_refusal.JWTRefusal`; the values are compared
in constant time where they are secrets' hashes.
"""

from __future__ import annotations

import hashlib
import hmac

from frontdoor_protocol.base64url import b64url_encode
from frontdoor_protocol.http_target_uri import htu_normalize
from frontdoor_protocol.jwt_profile import ClaimBinding, ProfiledJWT
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind

__all__ = ["access_token_binding", "access_token_hash", "constant_time_equal", "key_binding", "request_binding"]


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


def constant_time_equal(received: str, expected: str) -> bool:
    """``received == expected`` in constant time, safe for non-ASCII text too."""
    return hmac.compare_digest(received.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def _string(verified: ProfiledJWT, name: str) -> str:
    if name not in verified.claims:
        raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, name)
    value = verified.claims[name]
    if not isinstance(value, str):
        raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, name)
    return value


def request_binding(method: str, url: str) -> ClaimBinding:
    """``htm`` is ``method`` exactly and ``htu`` is ``url`` after RFC 9449 §4.3 normalisation.

    ``htu`` must have no query or fragment (RFC 9449 §4.2: the target URI "without query
    and fragment parts"): ``invalid_claim`` for ``htu``; a different method or URI is
    ``claim_mismatch``; an absent or non-string one ``missing_claim``/``invalid_claim``.

    Args:
        method: The request method.
        url: The request's target URI as the company serves it; its query is ignored.

    Raises:
        ValueError: At once, when ``url`` is not an absolute http(s) URL (a caller bug).
    """
    request_htu = htu_normalize(url)

    def check(verified: ProfiledJWT) -> None:
        if _string(verified, "htm") != method:
            raise JWTRefusal(JWTRefusalKind.CLAIM_MISMATCH, "htm")
        htu = _string(verified, "htu")
        if "?" in htu or "#" in htu:
            raise JWTRefusal(JWTRefusalKind.INVALID_CLAIM, "htu")
        try:
            matches = htu_normalize(htu) == request_htu
        except ValueError:
            matches = False
        if not matches:
            raise JWTRefusal(JWTRefusalKind.CLAIM_MISMATCH, "htu")

    return check


def access_token_binding(access_token: str | None) -> ClaimBinding:
    """``ath`` is the access token's hash, or absent when none is sent (PAP-4.3-07).

    Without a token an ``ath`` is ``forbidden_claim``; with one, a missing ``ath`` is
    ``missing_claim`` and any other value ``claim_mismatch``.
    """

    def check(verified: ProfiledJWT) -> None:
        claims = verified.claims
        if access_token is None:
            if "ath" in claims:
                raise JWTRefusal(JWTRefusalKind.FORBIDDEN_CLAIM, "ath")
            return
        if "ath" not in claims:
            raise JWTRefusal(JWTRefusalKind.MISSING_CLAIM, "ath")
        ath = claims["ath"]
        if not isinstance(ath, str) or not access_token.isascii() or not constant_time_equal(
            ath, access_token_hash(access_token)
        ):
            raise JWTRefusal(JWTRefusalKind.CLAIM_MISMATCH, "ath")

    return check


def key_binding(expected_jkt: str | None) -> ClaimBinding:
    """The ``jwk`` header key's thumbprint is the token's ``cnf.jkt`` (PAP-4.3-03, RFC 9449 §6.1).

    ``None`` when no key is bound yet (a token request): nothing to check.
    """

    def check(verified: ProfiledJWT) -> None:
        if expected_jkt is None:
            return
        if verified.jkt is None or not constant_time_equal(verified.jkt, expected_jkt):
            raise JWTRefusal(JWTRefusalKind.KEY_NOT_BOUND)

    return check
