"""An OpenID Provider's ID token, checked as OpenID Connect Core 1.0 §3.1.3.7 says.

Pure: the caller passes the IdP's keys, what it expects and the time. The order is fixed
(header, key, signature, then the claims: ``iss``, ``aud``, ``azp``, ``exp``, ``iat``,
``nonce``, ``sub``, ``at_hash``), and a refusal names one :class:`IdTokenReason`, never
a claim's value. The same checks, without ``nonce`` and with the ``events`` claim, serve
the Back-Channel Logout token (OpenID Connect Back-Channel Logout 1.0 §2.6).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from enum import StrEnum
from typing import Any, Final

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "ID_TOKEN_SKEW",
    "IdTokenError",
    "IdTokenReason",
    "LOGOUT_EVENT",
    "at_hash",
    "idp_session_hash",
    "session_id_claim",
    "verify_id_token",
    "verify_logout_token",
]

ASYMMETRIC_ALGORITHMS: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                                          "ES512", "EdDSA"})
"""What an IdP may sign with: public-key algorithms only (no ``none``, no HMAC with the secret)."""
ID_TOKEN_SKEW: Final = 60
"""Seconds of clock difference tolerated on ``exp`` and ``iat``."""
MAX_ID_TOKEN_AGE: Final = 600
"""An ID token issued longer ago than this (plus the skew) is refused: it belongs to another sign-in."""
LOGOUT_EVENT: Final = "http://schemas.openid.net/event/backchannel-logout"
_LOGOUT_TYPES: Final = frozenset({"logout+jwt", "jwt"})
"""A logout token's ``typ`` when present: ``logout+jwt`` (§2.4 SHOULD), or the ``JWT`` older IdPs send.
Not what tells it from an ID token: the ``events`` claim and the absence of ``nonce`` do (§2.4, §2.6)."""
_MAX_TOKEN = 16_384


class IdTokenReason(StrEnum):
    """Why a token was refused (stable, safe to log)."""

    MALFORMED = "malformed"
    ALGORITHM = "algorithm"
    UNKNOWN_KEY = "unknown_key"
    SIGNATURE = "signature"
    ISSUER = "issuer"
    AUDIENCE = "audience"
    AZP = "azp"
    EXPIRED = "expired"
    IAT = "iat"
    NONCE = "nonce"
    SUBJECT = "subject"
    AT_HASH = "at_hash"
    EVENTS = "events"
    TYPE = "type"


class IdTokenError(Exception):
    """The token is refused; ``reason`` says why."""

    def __init__(self, reason: IdTokenReason) -> None:
        super().__init__(f"ID token refused: {reason}")
        self.reason = reason


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def at_hash(access_token: str, alg: str) -> str:
    """The ``at_hash`` of ``access_token`` for a token signed with ``alg`` (OIDC Core §3.1.3.6).

    The left half of the hash named by the algorithm (SHA-512 for EdDSA with Ed25519), base64url.
    """
    bits = alg[-3:] if alg[-3:] in ("256", "384", "512") else "512"
    digest = hashlib.new(f"sha{bits}", access_token.encode("ascii")).digest()
    return _b64url(digest[: len(digest) // 2])


def idp_session_hash(issuer: str, sid: str) -> str:
    """What Frontdoor keeps of an IdP session: SHA-256 (hex) of its issuer and ``sid``.

    The ``sid`` of an ID token (OIDC Core §2, Front/Back-Channel Logout) names the user's
    session at the IdP; a logout token naming the same ``iss`` and ``sid`` ends what that
    session signed in. Bound to the issuer, a ``sid`` of another IdP never matches.
    """
    return hashlib.sha256(f"{issuer}\x00{sid}".encode()).hexdigest()


def session_id_claim(claims: dict[str, Any]) -> str | None:
    """The token's ``sid`` when it is a usable one (a string of 1 to 255 characters), else None."""
    sid = claims.get("sid")
    return sid if isinstance(sid, str) and 1 <= len(sid) <= 255 else None


def _verified_payload(token: str, keys: KeySet, algorithms: frozenset[str]) -> tuple[dict[str, Any], str]:
    if not isinstance(token, str) or len(token) > _MAX_TOKEN or token.count(".") != 2:
        raise IdTokenError(IdTokenReason.MALFORMED)
    try:
        header = jws.extract_compact(token.encode("ascii")).headers()
    except (JoseError, ValueError, UnicodeError):
        raise IdTokenError(IdTokenReason.MALFORMED) from None
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in algorithms or alg not in ASYMMETRIC_ALGORITHMS:
        raise IdTokenError(IdTokenReason.ALGORITHM)
    if any(name in header for name in ("jwk", "jku", "x5c", "x5u", "crit")):
        raise IdTokenError(IdTokenReason.MALFORMED)  # keys come from the IdP's JWKS, never the token
    kid = header.get("kid")
    if kid is not None:
        try:
            candidates = [keys.get_by_kid(str(kid))]
        except (ValueError, JoseError):
            raise IdTokenError(IdTokenReason.UNKNOWN_KEY) from None
    else:
        candidates = list(keys.keys)
    if not candidates:
        raise IdTokenError(IdTokenReason.UNKNOWN_KEY)
    for key in candidates:
        try:
            verified = jws.deserialize_compact(token, key, algorithms=[alg])
        except (JoseError, ValueError):
            continue
        try:
            payload = json.loads(verified.payload)
        except (ValueError, UnicodeError):
            raise IdTokenError(IdTokenReason.MALFORMED) from None
        if not isinstance(payload, dict):
            raise IdTokenError(IdTokenReason.MALFORMED)
        return payload, alg
    raise IdTokenError(IdTokenReason.SIGNATURE)


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _common(claims: dict[str, Any], *, issuer: str, client_id: str, now: int, require_exp: bool) -> None:
    if claims.get("iss") != issuer:
        raise IdTokenError(IdTokenReason.ISSUER)
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
    if not audiences or client_id not in audiences or not all(isinstance(a, str) for a in audiences):
        raise IdTokenError(IdTokenReason.AUDIENCE)
    azp = claims.get("azp")
    # Several audiences: the party it was issued to must be named, and be us (§3.1.3.7 steps 4-5).
    if (len(audiences) > 1 and azp is None) or (azp is not None and azp != client_id):
        raise IdTokenError(IdTokenReason.AZP)
    exp = _number(claims, "exp")
    if (exp is None and require_exp) or (exp is not None and now >= exp + ID_TOKEN_SKEW):
        raise IdTokenError(IdTokenReason.EXPIRED)
    iat = _number(claims, "iat")
    if iat is None or iat > now + ID_TOKEN_SKEW or iat < now - MAX_ID_TOKEN_AGE - ID_TOKEN_SKEW:
        raise IdTokenError(IdTokenReason.IAT)


def _subject(claims: dict[str, Any]) -> None:
    sub = claims.get("sub")
    if not isinstance(sub, str) or not 1 <= len(sub) <= 255:
        raise IdTokenError(IdTokenReason.SUBJECT)


def verify_id_token(token: str, *, keys: KeySet, issuer: str, client_id: str, nonce: str, now: int,
                    algorithms: frozenset[str] = ASYMMETRIC_ALGORITHMS, access_token: str | None = None
                    ) -> dict[str, Any]:
    """Check an ID token from the token endpoint and return its claims.

    Args:
        token: The compact JWS ``id_token``.
        keys: The IdP's published keys (its ``jwks_uri``).
        issuer: The IdP's issuer identifier, compared exactly with ``iss``.
        client_id: Frontdoor's client ID at the IdP: in ``aud``, and ``azp`` when present.
        nonce: The nonce this sign-in sent; ``nonce`` must equal it.
        now: The current time, seconds since the epoch.
        algorithms: What the IdP advertises (``id_token_signing_alg_values_supported``);
            only asymmetric algorithms are ever accepted.
        access_token: The access token issued with it: checked against ``at_hash`` when present.

    Returns:
        The verified claims.

    Raises:
        IdTokenError: With the first failed check's reason.
    """
    claims, alg = _verified_payload(token, keys, algorithms)
    _common(claims, issuer=issuer, client_id=client_id, now=now, require_exp=True)
    got = claims.get("nonce")
    if not isinstance(got, str) or not hmac.compare_digest(got.encode(), nonce.encode()):
        raise IdTokenError(IdTokenReason.NONCE)
    _subject(claims)
    expected_hash = claims.get("at_hash")
    if expected_hash is not None and access_token is not None and (
            not isinstance(expected_hash, str) or not hmac.compare_digest(expected_hash, at_hash(access_token, alg))):
        raise IdTokenError(IdTokenReason.AT_HASH)
    return claims


def verify_logout_token(token: str, *, keys: KeySet, issuer: str, client_id: str, now: int,
                        algorithms: frozenset[str] = ASYMMETRIC_ALGORITHMS) -> dict[str, Any]:
    """Check a Back-Channel Logout token (OpenID Connect Back-Channel Logout 1.0 §2.4, §2.6).

    Like an ID token (signature, ``iss``, ``aud``, ``azp``, ``iat``, ``exp`` when present)
    and also: ``typ``, when present, is ``logout+jwt`` or ``JWT`` (§2.4: the explicit type is
    a SHOULD, and IdPs written before it send ``JWT``; compared as a media type, RFC 7515
    §4.1.9), anything else is refused; ``events`` holds the back-channel logout event,
    ``sub`` or ``sid`` is present, ``jti`` is present and ``nonce`` is absent (so an ID token,
    whose ``typ`` may well be ``JWT`` too, cannot pass for one).

    Returns:
        The verified claims.

    Raises:
        IdTokenError: With the first failed check's reason.
    """
    claims, _ = _verified_payload(token, keys, algorithms)
    typ = jws.extract_compact(token.encode("ascii")).headers().get("typ")
    # RFC 7515 §4.1.9: a media type, compared case-insensitively, "application/" optional.
    if typ is not None and (not isinstance(typ, str) or typ.lower().removeprefix("application/") not in _LOGOUT_TYPES):
        raise IdTokenError(IdTokenReason.TYPE)
    _common(claims, issuer=issuer, client_id=client_id, now=now, require_exp=False)
    events = claims.get("events")
    if not isinstance(events, dict) or not isinstance(events.get(LOGOUT_EVENT), dict) or "nonce" in claims:
        raise IdTokenError(IdTokenReason.EVENTS)
    jti = claims.get("jti")
    if not isinstance(jti, str) or not 1 <= len(jti) <= 255:
        raise IdTokenError(IdTokenReason.MALFORMED)
    if "sub" in claims:
        _subject(claims)
    if "sid" in claims and session_id_claim(claims) is None:
        raise IdTokenError(IdTokenReason.SUBJECT)
    if "sub" not in claims and "sid" not in claims:
        raise IdTokenError(IdTokenReason.SUBJECT)
    return claims
