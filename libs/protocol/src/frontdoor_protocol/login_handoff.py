"""The signed login handoff: how a company tells Frontdoor who signed in (ADR 0002).

Frontdoor never sees a user's password. It sends the browser to the company's login URL
with a *login request* it signed with the tenant's issuer key; the company authenticates
its user its own way and sends the browser back to ``{issuer}/login/callback`` with a
*login response* it signed with its own key. Both are ES256 JWTs living at most
:data:`MAX_LOGIN_LIFETIME` seconds, with a one-use ``jti``:

- Request (header ``typ`` :data:`LOGIN_REQUEST_TYPE`): ``iss`` the issuer, ``aud`` the
  login URL's origin, ``jti``, ``iat``, ``exp``, ``return_to`` (``{issuer}/login/callback``),
  ``agent_name``, ``scope`` (space-separated). No secrets.
- Response (header ``typ`` :data:`LOGIN_RESPONSE_TYPE`, ``JWT`` or none): ``iss`` the
  login URL's origin, ``aud`` the issuer, ``sub`` the company's account ID,
  ``request_jti`` the request's ``jti``, ``iat``, ``exp``, ``jti``.

Verification follows RFC 8725 (GUIDE-jwt-01..05): ES256 only (never ``none`` or an HMAC),
keys from the verifier's own source (a ``jwk``/``jku``/``x5c``/``x5u`` header is refused),
``aud`` one string, bounded lifetime, a little clock skew. Every refusal is a
:class:`LoginHandoffError` whose ``reason`` is stable and safe to log; one-use of the
``jti`` values is the caller's (it holds the replay store). Pure: the clock is injected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Final, cast
from urllib.parse import urlsplit

import msgspec
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import sign_compact_jws
from frontdoor_protocol.jws_verification import key_fits_algorithm
from frontdoor_protocol.jwt_claims import is_jwt_id, numeric_date
from frontdoor_protocol.jwt_profile import (
    ClaimRule,
    JWTProfile,
    JWTRefusal,
    ProfiledJWT,
    reason_table,
    required_string,
    verify_profiled_jwt,
)
from frontdoor_protocol.scopes import format_scope, parse_scope

__all__ = [
    "DEFAULT_LOGIN_SKEW",
    "LOGIN_CALLBACK_PATH",
    "LOGIN_HANDOFF_ALGORITHM",
    "LOGIN_REQUEST_TYPE",
    "LOGIN_RESPONSE_TYPE",
    "MAX_ACCOUNT_ID_LENGTH",
    "MAX_AGENT_NAME_LENGTH",
    "MAX_LOGIN_LIFETIME",
    "LoginHandoffError",
    "LoginHandoffReason",
    "LoginRequest",
    "LoginResponse",
    "build_login_request_claims",
    "build_login_response_claims",
    "is_account_id",
    "login_callback_url",
    "login_key_set",
    "login_origin",
    "login_public_key",
    "sign_login_request",
    "sign_login_response",
    "verify_login_request",
    "verify_login_response",
]

LOGIN_HANDOFF_ALGORITHM: Final = "ES256"
"""The only algorithm either side signs or accepts."""
LOGIN_REQUEST_TYPE: Final = "login-request+jwt"
"""The request's ``typ``: no other JWT the issuer key signs (a Session Token) passes for one."""
LOGIN_RESPONSE_TYPE: Final = "login-response+jwt"
"""The response's ``typ`` the sdk sets; ``JWT`` or no ``typ`` is accepted too (ADR 0002)."""
MAX_LOGIN_LIFETIME: Final = 120
"""Most seconds from ``iat`` to ``exp`` of either message."""
DEFAULT_LOGIN_SKEW: Final = 30
"""Seconds of clock difference tolerated between Frontdoor and the company."""
LOGIN_CALLBACK_PATH: Final = "/login/callback"
MAX_ACCOUNT_ID_LENGTH: Final = 256
MAX_AGENT_NAME_LENGTH: Final = 200

_ALLOWED: Final = frozenset({LOGIN_HANDOFF_ALGORITHM})
_RESPONSE_TYPES: Final = frozenset({LOGIN_RESPONSE_TYPE, "jwt"})
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_VISIBLE_ASCII: Final = re.compile(r"[\x21-\x7e]+")
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


class LoginHandoffReason(StrEnum):
    """Why a login request or response was refused: stable, never naming a value."""

    MALFORMED = "malformed"
    """Not a compact JWS, or its claims are not a JSON object."""
    WRONG_TYPE = "wrong_type"
    """The header's ``typ`` is another kind of JWT."""
    ALGORITHM_NOT_ACCEPTED = "algorithm_not_accepted"
    """``alg`` is not ES256 (``none``, an HMAC, RSA...)."""
    EMBEDDED_KEY = "embedded_key"
    """The header carries or points to a key (``jwk``, ``jku``, ``x5c``, ``x5u``)."""
    UNKNOWN_KEY = "unknown_key"
    """No trusted key has the ``kid``: the verifier may refetch the signer's JWKS once."""
    BAD_SIGNATURE = "bad_signature"
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"
    MISSING_CLAIM = "missing_claim"
    """A required claim is absent (``claim`` names it)."""
    INVALID_CLAIM = "invalid_claim"
    """A claim has the wrong type or form (``claim`` names it)."""
    LIFETIME_TOO_LONG = "lifetime_too_long"
    """``exp - iat`` is above the maximum, or not positive."""
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    """``iat`` or ``nbf`` is in the future beyond the skew."""
    WRONG_REQUEST = "wrong_request"
    """The response answers another request (``request_jti``)."""
    WRONG_RETURN_TO = "wrong_return_to"
    """The request's ``return_to`` is not ``{issuer}/login/callback``."""


class LoginHandoffError(ValueError):
    """A login request or response is refused.

    Attributes:
        reason: The stable :class:`LoginHandoffReason`.
        claim: For ``missing_claim``/``invalid_claim``, the claim's name (ours, never a value).
    """

    def __init__(self, reason: LoginHandoffReason, claim: str | None = None) -> None:
        super().__init__(reason.value if claim is None else f"{reason.value}: {claim}")
        self.reason = reason
        self.claim = claim


class LoginRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A verified login request, as the company's login page uses it.

    Attributes:
        return_to: Where to send the browser with the response: ``{issuer}/login/callback``.
        agent_name: The agent's display name: show it escaped, it is the agent's words.
        scopes: The scopes being asked, in order.
        jti: The request's ID: put it in the response's ``request_jti``.
        exp: When the request expires, seconds since the epoch.
    """

    return_to: str
    agent_name: str
    scopes: tuple[str, ...]
    jti: str
    exp: int


class LoginResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A verified login response.

    Attributes:
        account_id: ``sub``: the company's ID for the signed-in account.
        jti: The response's one-use ID: the caller refuses it a second time.
        exp: ``exp``, whole seconds (rounded up): keep the ``jti`` until then plus the skew.
    """

    account_id: str
    jti: str
    exp: int


def is_account_id(value: object) -> bool:
    """Whether ``value`` is an acceptable account ID: 1 to 256 visible ASCII characters."""
    return isinstance(value, str) and len(value) <= MAX_ACCOUNT_ID_LENGTH and _VISIBLE_ASCII.fullmatch(value) is not None


def _is_agent_name(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_AGENT_NAME_LENGTH and value.isprintable()


def login_origin(url: str) -> str:
    """The origin of a login URL as both messages name it: ``scheme://host[:port]``.

    Scheme and host are lower-cased and a default port is dropped, so
    ``HTTPS://Login.Example:443/x`` gives ``https://login.example``.

    Args:
        url: The company's login URL (``login.url`` of the tenant's settings).

    Returns:
        The origin.

    Raises:
        ValueError: If ``url`` is not an absolute http(s) URL with a host.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("not an absolute URL") from None
    host = parts.hostname
    if parts.scheme not in _DEFAULT_PORTS or not host:
        raise ValueError("not an absolute http(s) URL")
    shown = f"[{host}]" if ":" in host else host
    suffix = "" if port is None or port == _DEFAULT_PORTS[parts.scheme] else f":{port}"
    return f"{parts.scheme}://{shown}{suffix}"


def login_callback_url(issuer: str) -> str:
    """``{issuer}/login/callback``: the only ``return_to`` a request may carry."""
    return f"{issuer}{LOGIN_CALLBACK_PATH}"


def login_public_key(jwk: Mapping[str, Any]) -> ECKey:
    """A company's public signing key for login responses, validated.

    Args:
        jwk: A JWK: ``kty`` ``EC``, ``crv`` ``P-256``, ``x``, ``y``, a ``kid``; optional
            ``use`` (``sig``), ``key_ops`` (with ``verify``) and ``alg`` (``ES256``).

    Returns:
        The public key.

    Raises:
        ValueError: With a sentence saying what is wrong; a JWK holding private or
            symmetric material is refused (never trust a published private key).
    """
    if not isinstance(jwk, Mapping):
        raise ValueError("must be a JSON Web Key object")
    if not _PRIVATE_MEMBERS.isdisjoint(jwk):
        raise ValueError("holds private key material: upload the public key only")
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise ValueError("must be an EC P-256 key (ES256)")
    kid = jwk.get("kid")
    if not isinstance(kid, str) or not kid or not kid.isprintable() or len(kid) > 128:
        raise ValueError("needs a kid: the one your login responses name in their header")
    try:
        key = ECKey.import_key(cast(dict[str, str | list[str]], dict(jwk)))
    except (JoseError, ValueError, TypeError, KeyError):
        raise ValueError("is not a valid EC P-256 public key") from None
    if key.is_private or not key_fits_algorithm(key, LOGIN_HANDOFF_ALGORITHM):
        raise ValueError("must be usable for ES256 signatures (use sig, key_ops verify, alg ES256)")
    return key


def login_key_set(document: object) -> KeySet:
    """The keys of a company's JWKS that may verify login responses.

    A set holding any private or symmetric material is refused whole; entries that are
    not usable ES256 public keys are skipped (a set may also hold encryption keys).

    Args:
        document: The decoded JWKS.

    Returns:
        At least one public EC P-256 key.

    Raises:
        ValueError: Not a JWKS, private material published, or no usable key.
    """
    if not isinstance(document, Mapping):
        raise ValueError("not a JSON Web Key Set")
    entries = document.get("keys")
    if not isinstance(entries, list) or len(entries) > 32:
        raise ValueError("not a JSON Web Key Set")
    keys: list[ECKey] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        if not _PRIVATE_MEMBERS.isdisjoint(entry):
            raise ValueError("the key set publishes private key material")
        if entry.get("kty") != "EC" or entry.get("crv") != "P-256":
            continue
        try:
            key = ECKey.import_key(cast(dict[str, str | list[str]], dict(entry)))
        except (JoseError, ValueError, TypeError, KeyError):
            continue
        if key_fits_algorithm(key, LOGIN_HANDOFF_ALGORITHM):
            keys.append(key)
    if not keys:
        raise ValueError("the key set has no usable ES256 key")
    return KeySet(list(keys))


def _check_times(now: int, lifetime: int) -> None:
    if not 0 < lifetime <= MAX_LOGIN_LIFETIME:
        raise ValueError(f"a login message lives 1 to {MAX_LOGIN_LIFETIME} seconds")
    if numeric_date(now) is None:
        raise ValueError("now must be seconds since the epoch")


def build_login_request_claims(
    *,
    issuer: str,
    login_url: str,
    return_to: str,
    agent_name: str,
    scopes: Iterable[str],
    jti: str,
    now: int,
    lifetime: int = MAX_LOGIN_LIFETIME,
) -> dict[str, Any]:
    """The claims of a login request (ADR 0002, "The login handoff").

    Args:
        issuer: The tenant's issuer identifier: ``iss``.
        login_url: The company's login URL; ``aud`` is its origin.
        return_to: Must be ``{issuer}/login/callback``.
        agent_name: The agent's display name (1-200 printable characters).
        scopes: The scopes being asked (at least one scope-token).
        jti: A fresh one-use ID of at least 128 random bits (the caller stores it).
        now: The current time, seconds since the epoch: ``iat``.
        lifetime: Seconds until ``exp``, at most :data:`MAX_LOGIN_LIFETIME`.

    Returns:
        The claims, ready for :func:`sign_login_request`.

    Raises:
        ValueError: For any argument that would make a request the company must refuse.
    """
    _check_times(now, lifetime)
    if not issuer or issuer.endswith("/"):
        raise ValueError("issuer must be the issuer identifier, without a trailing slash")
    if return_to != login_callback_url(issuer):
        raise ValueError("return_to must be {issuer}/login/callback")
    if not _is_agent_name(agent_name):
        raise ValueError(f"agent_name must be 1 to {MAX_AGENT_NAME_LENGTH} printable characters")
    if not is_jwt_id(jti):
        raise ValueError("jti must be 16 to 256 visible ASCII characters")
    scope = format_scope(scopes)
    if not scope:
        raise ValueError("a login request asks for at least one scope")
    return {
        "iss": issuer,
        "aud": login_origin(login_url),
        "jti": jti,
        "iat": now,
        "exp": now + lifetime,
        "return_to": return_to,
        "agent_name": agent_name,
        "scope": scope,
    }


def build_login_response_claims(
    *,
    account_id: str,
    request_jti: str,
    login_origin: str,
    issuer: str,
    jti: str,
    now: int,
    lifetime: int = 60,
) -> dict[str, Any]:
    """The claims of a login response (ADR 0002, "The login handoff").

    Args:
        account_id: The company's ID for the account that signed in: ``sub``.
        request_jti: The verified request's ``jti``.
        login_origin: The origin of the company's login URL: ``iss``.
        issuer: The Frontdoor issuer identifier: ``aud``.
        jti: A fresh one-use ID of at least 128 random bits.
        now: The current time, seconds since the epoch: ``iat``.
        lifetime: Seconds until ``exp``, at most :data:`MAX_LOGIN_LIFETIME`.

    Returns:
        The claims, ready for :func:`sign_login_response`.

    Raises:
        ValueError: For an argument Frontdoor would refuse.
    """
    _check_times(now, lifetime)
    if not is_account_id(account_id):
        raise ValueError(f"account_id must be 1 to {MAX_ACCOUNT_ID_LENGTH} visible ASCII characters")
    if not is_jwt_id(request_jti) or not is_jwt_id(jti):
        raise ValueError("request_jti and jti must be 16 to 256 visible ASCII characters")
    if login_origin != _origin_or_empty(login_origin) or not issuer:
        raise ValueError("login_origin must be an origin such as https://login.example; issuer is required")
    return {
        "iss": login_origin,
        "aud": issuer,
        "sub": account_id,
        "request_jti": request_jti,
        "iat": now,
        "exp": now + lifetime,
        "jti": jti,
    }


def _origin_or_empty(value: str) -> str:
    try:
        return login_origin(value)
    except ValueError:
        return ""


def _sign(claims: Mapping[str, Any], key: ECKey, kid: str, typ: str) -> str:
    if not isinstance(key, ECKey) or key.curve_name != "P-256" or not key.is_private:
        raise ValueError("login messages are signed with a private P-256 key")
    if not kid:
        raise ValueError("kid is required")
    return sign_compact_jws({"alg": LOGIN_HANDOFF_ALGORITHM, "typ": typ, "kid": kid}, claims, key)


def sign_login_request(claims: Mapping[str, Any], key: ECKey, kid: str) -> str:
    """Sign request claims with the tenant's issuer key (``typ`` :data:`LOGIN_REQUEST_TYPE`).

    Raises:
        ValueError: Unless ``key`` is a private P-256 key and ``kid`` is given.
    """
    return _sign(claims, key, kid, LOGIN_REQUEST_TYPE)


def sign_login_response(claims: Mapping[str, Any], key: ECKey, kid: str) -> str:
    """Sign response claims with the company's key (``typ`` :data:`LOGIN_RESPONSE_TYPE`).

    Raises:
        ValueError: Unless ``key`` is a private P-256 key and ``kid`` is given.
    """
    return _sign(claims, key, kid, LOGIN_RESPONSE_TYPE)


_REQUEST_PROFILE: Final = JWTProfile(
    types=frozenset({LOGIN_REQUEST_TYPE}),
    algorithms=_ALLOWED,
    max_lifetime=MAX_LOGIN_LIFETIME,
    required=(ClaimRule("return_to"),),
    kidless_tries_every_key=True,
)
"""Signed by the issuer key; ``return_to``, ``agent_name`` and ``scope`` are checked after."""
_RESPONSE_PROFILE: Final = JWTProfile(
    types=_RESPONSE_TYPES,
    typ_optional=True,
    algorithms=_ALLOWED,
    max_lifetime=MAX_LOGIN_LIFETIME,
    required=(ClaimRule("sub", is_account_id), ClaimRule("request_jti")),
    # Without a kid every fitting key is tried: a company rotating keys may publish two.
    kidless_tries_every_key=True,
)
_REASONS: Final = reason_table(LoginHandoffReason)


def _verified(token: str, profile: JWTProfile, *, keys: KeySet, iss: str, aud: str, now: int, skew: int) -> ProfiledJWT:
    try:
        return verify_profiled_jwt(token, profile, keys=keys, issuer=iss, audience=aud, now=now, skew=skew)
    except JWTRefusal as refused:
        raise LoginHandoffError(_REASONS[refused.kind], refused.claim) from None


def _string(claims: Mapping[str, Any], name: str) -> str:
    try:
        return required_string(claims, name)
    except JWTRefusal as refused:
        raise LoginHandoffError(_REASONS[refused.kind], refused.claim) from None


def _check_parameters(max_lifetime: int, skew: int) -> None:
    if not 0 < max_lifetime <= MAX_LOGIN_LIFETIME or not 0 <= skew <= 300:
        raise ValueError(f"max_lifetime must be 1 to {MAX_LOGIN_LIFETIME} and skew 0 to 300 seconds")


def verify_login_request(
    token: str,
    *,
    keys: KeySet,
    issuer: str,
    login_origin: str,
    now: int,
    max_lifetime: int = MAX_LOGIN_LIFETIME,
    skew: int = DEFAULT_LOGIN_SKEW,
) -> LoginRequest:
    """Verify a login request on the company's login page.

    Args:
        token: The ``request`` query parameter.
        keys: The issuer's public keys (its ``{issuer}/jwks.json``).
        issuer: Your Frontdoor issuer identifier: ``iss`` must equal it.
        login_origin: Your login page's origin: ``aud`` must equal it.
        now: The current time, seconds since the epoch.
        max_lifetime: Most seconds from ``iat`` to ``exp``.
        skew: Seconds of clock difference tolerated.

    Returns:
        What the page needs: where to answer, who is asking, for what, and the ``jti``.

    Raises:
        LoginHandoffError: ``unknown_key`` (refetch the issuer's JWKS once and retry) or
            any other reason.
        ValueError: For a bad parameter.
    """
    _check_parameters(max_lifetime, skew)
    profile = _REQUEST_PROFILE.with_limits(max_lifetime=max_lifetime)
    verified = _verified(token, profile, keys=keys, iss=issuer, aud=login_origin, now=now, skew=skew)
    claims = verified.claims
    if claims["return_to"] != login_callback_url(issuer):
        raise LoginHandoffError(LoginHandoffReason.WRONG_RETURN_TO)
    agent_name = _string(claims, "agent_name")
    if not _is_agent_name(agent_name):
        raise LoginHandoffError(LoginHandoffReason.INVALID_CLAIM, "agent_name")
    try:
        scopes = parse_scope(_string(claims, "scope"))
    except ValueError:
        raise LoginHandoffError(LoginHandoffReason.INVALID_CLAIM, "scope") from None
    return LoginRequest(
        return_to=login_callback_url(issuer), agent_name=agent_name, scopes=scopes, jti=verified.jti, exp=verified.exp
    )


def verify_login_response(
    token: str,
    *,
    keys: KeySet,
    expected_issuer: str,
    audience: str,
    expected_request_jti: str,
    now: int,
    max_lifetime: int = MAX_LOGIN_LIFETIME,
    skew: int = DEFAULT_LOGIN_SKEW,
) -> LoginResponse:
    """Verify a login response at ``{issuer}/login/callback``.

    One-use of ``jti`` (and of the request's ``jti``) is the caller's: it claims both in
    its replay store after this returns.

    Args:
        token: The ``response`` parameter.
        keys: The company's keys (its ``jwks_uri`` or the uploaded ``public_jwk``).
        expected_issuer: The login URL's origin (:func:`login_origin`): ``iss``.
        audience: The tenant's issuer identifier: ``aud``.
        expected_request_jti: The ``jti`` of the request this browser was sent with.
        now: The current time, seconds since the epoch.
        max_lifetime: Most seconds from ``iat`` to ``exp``, at most 120.
        skew: Seconds of clock difference tolerated.

    Returns:
        The account ID, the response's ``jti`` and ``exp``.

    Raises:
        LoginHandoffError: ``unknown_key`` (refetch the company's JWKS once and retry) or
            any other reason.
        ValueError: For a bad parameter.
    """
    _check_parameters(max_lifetime, skew)
    profile = _RESPONSE_PROFILE.with_limits(max_lifetime=max_lifetime)
    verified = _verified(token, profile, keys=keys, iss=expected_issuer, aud=audience, now=now, skew=skew)
    if verified.claims["request_jti"] != expected_request_jti:
        raise LoginHandoffError(LoginHandoffReason.WRONG_REQUEST)
    return LoginResponse(account_id=verified.claims["sub"], jti=verified.jti, exp=verified.exp)
