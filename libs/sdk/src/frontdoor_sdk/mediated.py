"""Your relay endpoint's side of Mediated Sign-In (PAP §4.7, docs/sign-in.md).

Frontdoor never checks a password. When an agent signs a user in with the fields you
declared (say email and password), Frontdoor POSTs them once to your ``relay_url`` as
``application/jwt``: a JWT signed with your issuer's key (``typ: frontdoor-mediated+jwt``,
``aud`` your relay's origin, 60 s, one-use ``jti``). Your endpoint:

1. verifies it with :func:`verify_relay_request` (pass a ``replay_cache`` so each
   ``jti`` is accepted once);
2. checks the fields its own way, never logging them;
3. answers JSON: :func:`relay_complete`, :func:`relay_failed` (the same for an unknown
   account and a wrong password), :func:`relay_code_required` or :func:`relay_expired`.

Example::

    issuer_keys = issuer_key_source(ISSUER, http_client)   # once, at start-up
    replays = InMemoryReplayCache()

    request = await verify_relay_request(body.decode(), issuer=ISSUER, issuer_keys=issuer_keys,
                                         relay_origin=ORIGIN, now=datetime.now(UTC), replay_cache=replays)
    user = check(request.fields["email"], request.fields["password"])
    return relay_complete(user.id) if user else relay_failed()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

from frontdoor_protocol.compact_jws import CompactJWS
from frontdoor_protocol.jwt_profile import (
    ClaimRule,
    JWTProfile,
    JWTRefusal,
    check_profiled_claims,
    check_profiled_signature,
    read_profiled_jws,
    reason_table,
    required_string,
)
from frontdoor_protocol.login_handoff import is_account_id
from joserfc.jwk import KeySet

from frontdoor_sdk.login_handoff import IssuerKeySource
from frontdoor_sdk.replay_cache import ReplayCache

__all__ = [
    "RELAY_TYPE",
    "RelayRefused",
    "RelayRefusedReason",
    "RelayRequest",
    "relay_code_required",
    "relay_complete",
    "relay_expired",
    "relay_failed",
    "verify_relay_request",
]

RELAY_TYPE: Final = "frontdoor-mediated+jwt"
"""The relay request's ``typ``."""
MAX_RELAY_LIFETIME: Final = 60
"""Most seconds from ``iat`` to ``exp`` (Frontdoor signs for exactly 60)."""
DEFAULT_RELAY_SKEW: Final = 30
_MAX_VALUE: Final = 1024
_MAX_ACCOUNT: Final = 255
_MAX_SIGN_IN_ID: Final = 256
_MAX_SENT_TO: Final = 100
_ALGORITHM: Final = "ES256"


class RelayRefusedReason(StrEnum):
    """Why a relay request was refused: stable, never naming a value."""

    MALFORMED = "malformed"
    WRONG_TYPE = "wrong_type"
    ALGORITHM_NOT_ACCEPTED = "algorithm_not_accepted"
    EMBEDDED_KEY = "embedded_key"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"
    MISSING_CLAIM = "missing_claim"
    INVALID_CLAIM = "invalid_claim"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    REPLAYED = "replayed"
    """The ``jti`` was already accepted once."""


class RelayRefused(ValueError):
    """A relay request is refused: answer 400 (or 401) and check nothing.

    Attributes:
        reason: The stable :class:`RelayRefusedReason`.
        claim: For ``missing_claim``/``invalid_claim``, the claim's name (never a value).
    """

    def __init__(self, reason: RelayRefusedReason, claim: str | None = None) -> None:
        super().__init__(reason.value if claim is None else f"{reason.value}: {claim}")
        self.reason = reason
        self.claim = claim


@dataclass(frozen=True, slots=True, kw_only=True)
class RelayRequest:
    """A verified relay request. Its values are secrets: never log or store them.

    Attributes:
        user_id: Frontdoor's User ID for the person (``sub``).
        client_id: The agent asking (``client_id``).
        jti: The request's unique ID (already claimed when a ``replay_cache`` was given).
        exp: When the request expires, epoch seconds.
        scope: The scopes asked for (a credentials step), else ``""``.
        fields: The declared fields and their values (a credentials step), else empty.
        sign_in_id: Your ``sign_in_id`` from an earlier ``code_required`` (a code step).
        code: The one-time code the user gave (a code step).
    """

    user_id: str
    client_id: str
    jti: str
    exp: int
    scope: str = ""
    fields: dict[str, str] = field(default_factory=dict, repr=False)
    sign_in_id: str | None = None
    code: str | None = field(default=None, repr=False)

    @property
    def is_code(self) -> bool:
        """Whether this is the one-time code step (``sign_in_id`` + ``code``)."""
        return self.sign_in_id is not None


def _refuse(reason: RelayRefusedReason, claim: str | None = None) -> RelayRefused:
    return RelayRefused(reason, claim)


def _origin(relay_origin: str) -> str:
    parts = urlsplit(relay_origin)
    if parts.scheme not in ("https", "http") or not parts.netloc or parts.path not in ("", "/") or parts.query \
            or parts.fragment:
        raise ValueError("relay_origin must be an origin such as https://shop.example")
    return f"{parts.scheme}://{parts.netloc}"


_PROFILE: Final = JWTProfile(
    types=frozenset({RELAY_TYPE}),
    algorithms=frozenset({_ALGORITHM}),
    max_lifetime=MAX_RELAY_LIFETIME,
    required=(ClaimRule("sub"), ClaimRule("client_id")),
    max_string_length=_MAX_VALUE,
)
"""Signed by your issuer's key for your relay's origin; the step's claims are checked after."""
_REASONS: Final = reason_table(RelayRefusedReason)


def _refused(refusal: JWTRefusal) -> RelayRefused:
    return RelayRefused(_REASONS[refusal.kind], refusal.claim)


def _check_signature(jws: CompactJWS, keys: KeySet) -> None:
    try:
        check_profiled_signature(jws, _PROFILE, keys)
    except JWTRefusal as refusal:
        raise _refused(refusal) from None


def _string(claims: dict[str, Any], name: str, *, limit: int = _MAX_VALUE) -> str:
    try:
        return required_string(claims, name, max_length=limit)
    except JWTRefusal as refusal:
        raise _refused(refusal) from None


def _request(jws: CompactJWS, *, issuer: str, audience: str, now: int, skew: int) -> RelayRequest:
    try:
        verified = check_profiled_claims(jws, _PROFILE, issuer=issuer, audience=audience, now=now, skew=skew)
    except JWTRefusal as refusal:
        raise _refused(refusal) from None
    claims, jti, exp = verified.claims, verified.jti, verified.exp
    user_id, client_id = claims["sub"], claims["client_id"]
    if "fields" in claims:
        if "code" in claims or "sign_in_id" in claims:
            raise _refuse(RelayRefusedReason.INVALID_CLAIM, "fields")
        fields = claims["fields"]
        if (not isinstance(fields, dict) or not fields
                or any(not isinstance(k, str) or not k or not isinstance(v, str) or not v or len(v) > _MAX_VALUE
                       for k, v in fields.items())):
            raise _refuse(RelayRefusedReason.INVALID_CLAIM, "fields")
        return RelayRequest(user_id=user_id, client_id=client_id, jti=jti, exp=exp, scope=_string(claims, "scope"), fields=dict(fields))
    if "code" not in claims and "sign_in_id" not in claims:
        raise _refuse(RelayRefusedReason.MISSING_CLAIM, "fields")
    return RelayRequest(user_id=user_id, client_id=client_id, jti=jti, exp=exp,
                        sign_in_id=_string(claims, "sign_in_id", limit=_MAX_SIGN_IN_ID),
                        code=_string(claims, "code"))


async def verify_relay_request(
    token: str,
    *,
    issuer: str,
    issuer_keys: KeySet | IssuerKeySource,
    relay_origin: str,
    now: datetime,
    replay_cache: ReplayCache | None = None,
    skew: int = DEFAULT_RELAY_SKEW,
) -> RelayRequest:
    """Verify the body Frontdoor posted to your relay endpoint.

    Checks, in order: a compact JWS with ``typ: frontdoor-mediated+jwt``, ``alg: ES256``
    only, no embedded key (``jwk``/``jku``/``x5c``/``x5u``), a signature by your issuer's
    key; ``iss`` is ``issuer``, ``aud`` is ``relay_origin``, at most 60 s from ``iat`` to
    ``exp`` and not expired, a ``jti``; ``sub``, ``client_id`` and either ``scope`` +
    ``fields`` or ``sign_in_id`` + ``code``. Then, with ``replay_cache``, claims the ``jti``.

    Args:
        token: The request body (``application/jwt``), decoded as ASCII.
        issuer: Your Frontdoor issuer identifier (``auth.issuer`` in ``poppy.json``).
        issuer_keys: Your issuer's keys, or a :func:`issuer_key_source` (an unknown ``kid``
            refetches them once).
        relay_origin: Your relay's origin, e.g. ``https://shop.example``: the ``aud``.
        now: The current time, timezone-aware.
        replay_cache: Where accepted ``jti`` values are kept (:class:`InMemoryReplayCache`
            for one process, a shared store for several). Without one, rejecting a reused
            ``jti`` is yours to do.
        skew: Seconds of clock difference tolerated (0 to 300).

    Returns:
        The verified :class:`RelayRequest`: its values are secrets, never log them.

    Raises:
        RelayRefused: The request is not acceptable (``reason`` says why); check nothing.
        JwksUnavailable: The issuer's keys could not be fetched (answer 503).
        ValueError: ``relay_origin`` is not an origin, or ``skew`` is out of range.
    """
    if not 0 <= skew <= 300:
        raise ValueError("skew must be 0 to 300 seconds")
    audience = _origin(relay_origin)
    try:
        jws = read_profiled_jws(token, _PROFILE)
    except JWTRefusal as refusal:
        raise _refused(refusal) from None
    if isinstance(issuer_keys, KeySet):
        _check_signature(jws, issuer_keys)
    else:
        try:
            _check_signature(jws, await issuer_keys.keys())
        except RelayRefused as exc:
            if exc.reason is not RelayRefusedReason.UNKNOWN_KEY:
                raise
            fresh = await issuer_keys.refresh_for_unknown_kid()
            if fresh is None:
                raise
            _check_signature(jws, fresh)
    request = _request(jws, issuer=issuer, audience=audience, now=int(now.timestamp()), skew=skew)
    if replay_cache is not None and not await replay_cache.first_use(
            f"frontdoor-mediated-relay\x00{issuer}\x00{request.jti}", until=request.exp + skew):
        raise _refuse(RelayRefusedReason.REPLAYED)
    return request


def relay_complete(account_id: str) -> dict[str, str]:
    """The answer for correct credentials (or code): ``{"status": "complete", "account": ID}``.

    Args:
        account_id: Your stable ID for the account (1-255 visible ASCII characters).

    Raises:
        ValueError: For an account ID Frontdoor would refuse.
    """
    if not is_account_id(account_id) or len(account_id) > _MAX_ACCOUNT:
        raise ValueError("account_id must be 1 to 255 visible ASCII characters")
    return {"status": "complete", "account": account_id}


def relay_failed() -> dict[str, str]:
    """The answer for an unknown account *and* a wrong password alike: ``{"status": "failed"}``."""
    return {"status": "failed"}


def relay_expired() -> dict[str, str]:
    """The answer when your code step is over: ``{"status": "expired"}``."""
    return {"status": "expired"}


def relay_code_required(sign_in_id: str, *, sent_to: str | None = None) -> dict[str, str]:
    """The answer asking for a one-time code you sent the user.

    Frontdoor relays the code later with this ``sign_in_id`` (it never shows it to the agent).

    Args:
        sign_in_id: Your reference for this sign-in (1-256 characters).
        sent_to: Where the code went, masked (e.g. ``a***@example.com``; at most 100 characters).

    Raises:
        ValueError: For a value Frontdoor would refuse.
    """
    if not sign_in_id or len(sign_in_id) > _MAX_SIGN_IN_ID:
        raise ValueError("sign_in_id must be 1 to 256 characters")
    if sent_to is not None and (not sent_to or len(sent_to) > _MAX_SENT_TO):
        raise ValueError("sent_to must be 1 to 100 characters")
    body = {"status": "code_required", "sign_in_id": sign_in_id}
    if sent_to is not None:
        body["sent_to"] = sent_to
    return body
