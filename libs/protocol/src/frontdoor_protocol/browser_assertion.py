"""The browser assertion: an agent joins its own browser to a Session (PAP §5).

The agent signs, with a key from its verified ``jwks_uri``, a JWT whose header ``typ`` is
:data:`BROWSER_ASSERTION_TYPE` and whose claims are ``iss`` (its ``client_id``), ``sub``
(the User ID of the Session), ``session_id``, ``aud`` (the company's
``web.browser_session_endpoint``), ``return_to`` (the page to open afterwards), ``iat``,
``exp`` and ``jti``. Its own browser form-POSTs it as ``assertion`` to that endpoint.

The company checks, in order (PAP-5-05..09):

1. A strict compact JWS whose ``typ`` is ``poppy-browser+jwt`` (so a Session assertion is
   never taken for one, and this one is refused at the token endpoint), an allowed
   public-key ``alg``, no key carried in the header.
2. The signature, with a key of the ``iss`` client; an unknown ``kid`` is
   ``unknown_key`` so the caller can refetch that client's JWKS once.
3. ``iss`` the client whose keys were used; ``aud`` one string equal to the endpoint;
   ``exp - iat`` at most :data:`MAX_BROWSER_ASSERTION_LIFETIME` seconds; not expired, not
   issued in the future (a small skew); a ``jti``.
4. ``sub`` and ``session_id`` well formed, and ``return_to`` an HTTPS URL on one of the
   company's domains or a subdomain of one.

Left to the caller, who holds the state: one use of the ``jti`` (until ``exp`` plus the
skew), and that the Session is live and belongs to that client and User (PAP-5-08).

Pure: no I/O, the clock is injected. Every refusal is a :class:`BrowserAssertionError`
whose ``reason`` is stable and safe to log; it never names a value from the assertion.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.compact_jws import MalformedJWS, parse_compact_jws
from frontdoor_protocol.https_url import UrlProblem, https_url_problem
from frontdoor_protocol.jwt_assertion import DEFAULT_ASSERTION_ALGORITHMS
from frontdoor_protocol.jwt_profile import ClaimRule, JWTProfile, JWTRefusal, reason_table, verify_profiled_jwt
from frontdoor_protocol.session_assertion import is_user_id

__all__ = [
    "BROWSER_ASSERTION_TYPE",
    "DEFAULT_BROWSER_SKEW",
    "MAX_BROWSER_ASSERTION_LIFETIME",
    "BrowserAssertion",
    "BrowserAssertionError",
    "BrowserAssertionReason",
    "browser_assertion_issuer",
    "is_company_url",
    "verify_browser_assertion",
]

BROWSER_ASSERTION_TYPE: Final = "poppy-browser+jwt"
"""The header ``typ`` of a browser assertion, and the only one accepted (PAP-5-05)."""
MAX_BROWSER_ASSERTION_LIFETIME: Final = 60
"""Most seconds from ``iat`` to ``exp`` (PAP-5-06)."""
DEFAULT_BROWSER_SKEW: Final = 30
"""Seconds of clock difference tolerated between the agent and the company."""

_MAX_SESSION_ID: Final = 256
_VISIBLE_ASCII: Final = re.compile(r"[\x21-\x7e]+")


class BrowserAssertionReason(StrEnum):
    """Why a browser assertion was refused: stable, never naming a value."""

    MALFORMED = "malformed"
    """Not a compact JWS, or its claims are not a JSON object."""
    WRONG_TYPE = "wrong_type"
    """``typ`` is absent or another kind of JWT (a Session assertion, a DPoP proof...)."""
    ALGORITHM_NOT_ACCEPTED = "algorithm_not_accepted"
    EMBEDDED_KEY = "embedded_key"
    UNKNOWN_KEY = "unknown_key"
    """No key of the client has the ``kid``: refetch its JWKS once and retry."""
    BAD_SIGNATURE = "bad_signature"
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"
    MISSING_CLAIM = "missing_claim"
    INVALID_CLAIM = "invalid_claim"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    """``exp - iat`` is above 60 seconds, or not positive."""
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    FOREIGN_RETURN_TO = "foreign_return_to"
    """``return_to`` is not an HTTPS URL on one of the company's domains (PAP-5-09)."""


class BrowserAssertionError(ValueError):
    """A browser assertion is refused.

    Attributes:
        reason: The stable :class:`BrowserAssertionReason`.
        claim: For ``missing_claim``/``invalid_claim``, the claim's name (never a value).
    """

    def __init__(self, reason: BrowserAssertionReason, claim: str | None = None) -> None:
        super().__init__(reason.value if claim is None else f"{reason.value}: {claim}")
        self.reason = reason
        self.claim = claim


class BrowserAssertion(msgspec.Struct, frozen=True, kw_only=True):
    """A verified browser assertion.

    Attributes:
        client_id: ``iss``: the agent.
        user_id: ``sub``: the User ID the Session must belong to.
        session_id: The Session the browser joins.
        return_to: Where to send the browser afterwards (on the company's domain).
        jti: The one-use ID: refuse it a second time until ``exp`` plus the skew.
        iat: ``iat``, whole seconds.
        exp: ``exp``, whole seconds (rounded up).
    """

    client_id: str
    user_id: str
    session_id: str
    return_to: str
    jti: str
    iat: int
    exp: int


def browser_assertion_issuer(assertion: str) -> str | None:
    """The unverified ``iss`` of an assertion: whose keys to fetch before verifying it.

    Args:
        assertion: The ``assertion`` form value.

    Returns:
        ``iss`` when the assertion parses and names one as a string, else ``None``.
    """
    try:
        iss = parse_compact_jws(assertion).claims().get("iss")
    except MalformedJWS:
        return None
    return iss if isinstance(iss, str) and iss else None


def is_company_url(url: object, domains: Iterable[str]) -> bool:
    """Whether ``url`` is an HTTPS URL on one of ``domains`` or a subdomain of one (PAP-5-02).

    ASCII only and without user information or whitespace, so it is safe to send as a
    ``Location``. Hosts compare ignoring ASCII case; ``shop.example`` covers
    ``www.shop.example`` but not ``evilshop.example``.

    Args:
        url: The candidate, e.g. a decoded ``return_to`` claim.
        domains: The company's domains (its ``organization.domain`` values).

    Returns:
        ``True`` when the browser may be sent there.
    """
    if not isinstance(url, str) or not url.isascii():
        return False
    if https_url_problem(url) not in (None, UrlProblem.HAS_FRAGMENT):
        return False
    host = (urlsplit(url).hostname or "").lower()
    for domain in domains:
        wanted = domain.lower().rstrip(".")
        if wanted and (host == wanted or host.endswith(f".{wanted}")):
            return True
    return False


def _is_session_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_SESSION_ID
        and _VISIBLE_ASCII.fullmatch(value) is not None
    )


_PROFILE: Final = JWTProfile(
    types=frozenset({BROWSER_ASSERTION_TYPE}),
    algorithms=frozenset(DEFAULT_ASSERTION_ALGORITHMS),
    max_lifetime=MAX_BROWSER_ASSERTION_LIFETIME,
    required=(ClaimRule("sub", is_user_id), ClaimRule("session_id", _is_session_id), ClaimRule("return_to")),
)
"""PAP-5-05..09: ``typ`` required, the client's keys, 60 s, then ``sub``, ``session_id``, ``return_to``."""

_REASONS: Final = reason_table(BrowserAssertionReason)


def verify_browser_assertion(
    assertion: str,
    *,
    keys: KeySet,
    client_id: str,
    endpoint: str,
    company_domains: Collection[str],
    now: int,
    skew: int = DEFAULT_BROWSER_SKEW,
    algorithms: Collection[str] = DEFAULT_ASSERTION_ALGORITHMS,
) -> BrowserAssertion:
    """Verify a browser assertion posted to the company's browser session endpoint.

    Args:
        assertion: The ``assertion`` form value.
        keys: The keys of ``client_id`` (its verified ``jwks_uri``).
        client_id: The agent whose keys these are: ``iss`` must equal it.
        endpoint: The company's ``web.browser_session_endpoint``: ``aud`` must equal it.
        company_domains: The company's domains; ``return_to`` must be on one of them.
        now: The current time, seconds since the epoch.
        skew: Seconds of clock difference tolerated (0 to 60).
        algorithms: Accepted ``alg`` values; public-key algorithms only.

    Returns:
        The verified claims. One use of ``jti`` and the Session are the caller's to check.

    Raises:
        BrowserAssertionError: ``unknown_key`` (refetch the client's JWKS once and retry)
            or any other reason.
        ValueError: For a bad parameter (an empty ``client_id`` or ``endpoint``, a skew out
            of range, an algorithm that is not public-key).
    """
    if not client_id or not endpoint:
        raise ValueError("client_id and endpoint are required")
    if not 0 <= skew <= 60:
        raise ValueError("skew must be 0 to 60 seconds")
    profile = _PROFILE.with_limits(algorithms=algorithms)
    try:
        verified = verify_profiled_jwt(
            assertion, profile, keys=keys, issuer=client_id, audience=endpoint, now=now, skew=skew
        )
    except JWTRefusal as refused:
        raise BrowserAssertionError(_REASONS[refused.kind], refused.claim) from None
    claims = verified.claims
    return_to = claims["return_to"]
    if not is_company_url(return_to, company_domains):
        raise BrowserAssertionError(BrowserAssertionReason.FOREIGN_RETURN_TO)
    return BrowserAssertion(
        client_id=client_id,
        user_id=claims["sub"],
        session_id=claims["session_id"],
        return_to=return_to,
        jti=verified.jti,
        iat=verified.iat,
        exp=verified.exp,
    )
