"""A request to a protected resource: the checks of PAP §4.3 and §6 on one Session Token.

What a company's API or MCP server checks on every request, before the Session's state:

1. No token in the URL (PAP-4.3-17, RFC 6750 §2.3): a request whose query has an
   ``access_token`` parameter is refused, whatever else it carries (``invalid_request``).
2. Exactly one ``Authorization`` header (RFC 6750 §3.1: a repeated credential is
   ``invalid_request``). None, or a scheme other than ``DPoP``/``Bearer``, is
   :class:`MissingToken`: ``invalid_token`` answered with a challenge without error
   attributes (RFC 6750 §3.1). Cookies are never consulted (PAP-4.3-12).
3. The Session Token itself (:func:`verify_session_token`, ``invalid_token``). At an
   ordinary endpoint its ``aud`` is the issuer and it is DPoP-bound; at an MCP server
   (``resource_url`` set) it must have been issued for exactly that URL (PAP-4.3-10,
   PAP-6-05): a resource-bound token anywhere else, and an ordinary token at an MCP
   server, are ``invalid_token``.
4. The scheme fits the token: ``Bearer`` only at an MCP server, only for a token without
   ``cnf`` (PAP-4.3-10); a DPoP-bound token sent as ``Bearer`` is ``invalid_token``
   (PAP-4.3-11, RFC 9449 §7.1); an unbound token sent as ``DPoP`` is ``invalid_token``.
5. With ``DPoP``: exactly one ``DPoP`` header (PAP-4.3-19) holding a proof for this method
   and URL, by the token's key, with ``ath`` of this token (:func:`verify_dpop_proof`,
   PAP-4.3-02..05, -07, -20, -21): ``invalid_dpop_proof`` or ``use_dpop_nonce``.

Replay of the proof's ``jti`` and the Session's state are the caller's: both need storage
or I/O. Every refusal is a :class:`ProtocolError` to answer with
``status_at(Surface.RESOURCE)`` and a challenge; none quotes the request.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Final, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlsplit

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.dpop_proof import DEFAULT_DPOP_IAT_WINDOW, DPoPProof, verify_dpop_proof
from frontdoor_protocol.errors import ChallengeScheme, ErrorCode, ProtocolError
from frontdoor_protocol.http_target_uri import htu_normalize
from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM
from frontdoor_protocol.session_token import SessionTokenClaims, verify_session_token
from frontdoor_protocol.verified_signatures import VerifiedSignatures

__all__ = [
    "AUTH_SCHEMES",
    "TOKEN68",
    "HeaderMultiMap",
    "MissingToken",
    "RequestHeaders",
    "VerifiedCaller",
    "authorization_credential",
    "has_token_in_url",
    "header_values",
    "verify_resource_request",
]

_TOKEN_PARAMETER: Final = "access_token"
# RFC 7235 §2.1: token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
AUTH_SCHEMES: Final = {scheme.value.lower(): scheme for scheme in ChallengeScheme}


@runtime_checkable
class HeaderMultiMap(Protocol):
    """A case-insensitive header multi-map with ``getall`` (multidict, Litestar's ``Headers``)."""

    def getall(self, key: str, default: list[str], /) -> list[str]:
        """Every value of header ``key``, in order, or ``default``."""
        ...


RequestHeaders = HeaderMultiMap | Mapping[str, str] | Iterable[tuple[str, str]]
"""Request headers: name/value pairs as received, a multi-map, or a plain mapping."""


class MissingToken(ProtocolError):
    """``invalid_token`` for a request with no credential this resource understands.

    RFC 6750 §3.1: a request that lacks authentication (no ``Authorization``, or a scheme
    other than ``DPoP``/``Bearer``) is answered with a challenge that has no ``error``
    attribute; the body still names ``invalid_token``.
    """

    __slots__ = ()


class VerifiedCaller(msgspec.Struct, frozen=True, kw_only=True):
    """A request whose token and proof passed every stateless check.

    Attributes:
        claims: The Session Token's claims.
        scheme: The scheme it was sent with.
        proof: The verified DPoP proof; ``None`` for a Bearer token at its MCP server.
            Store ``(proof.jkt, proof.jti)`` until ``proof.accept_until`` to refuse a replay.
    """

    claims: SessionTokenClaims
    scheme: ChallengeScheme
    proof: DPoPProof | None


def header_values(headers: RequestHeaders, name: str) -> list[str]:
    """Every value of one header, however the headers are held.

    Args:
        headers: Pairs (repeats kept), a multi-map with ``getall``, or a mapping (whose
            keys are compared case-insensitively, so ``DPoP`` and ``dpop`` are two values).
        name: The header name, any case.

    Returns:
        The values, in order; empty when the header is absent.
    """
    getall = getattr(headers, "getall", None)  # a multi-map (cheaper than a Protocol isinstance)
    if getall is not None:
        return list(getall(name, []))
    wanted = name.lower()
    if isinstance(headers, Mapping):
        return [value for key, value in headers.items() if key.lower() == wanted]
    pairs: Iterable[tuple[str, str]] = headers  # type: ignore[assignment]  # neither multi-map nor mapping
    return [value for key, value in pairs if key.lower() == wanted]


def has_token_in_url(url: str, query_params: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> bool:
    """Whether the request's query has an ``access_token`` parameter (RFC 6750 §2.3, PAP-4.3-17)."""
    if query_params is None:
        pairs: Iterable[tuple[str, str]] = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    elif isinstance(query_params, Mapping):
        pairs = query_params.items()
    else:
        pairs = query_params
    return any(key == _TOKEN_PARAMETER for key, _ in pairs)


def authorization_credential(headers: RequestHeaders) -> tuple[ChallengeScheme, str]:
    """The scheme and token of the request's one ``Authorization`` header.

    Args:
        headers: The request headers.

    Returns:
        ``(scheme, token)``; the token is a syntactically valid token68 (RFC 7235 §2.1).

    Raises:
        MissingToken: No ``Authorization``, or a scheme other than ``DPoP``/``Bearer``.
        ProtocolError: ``invalid_request`` for two headers, ``invalid_token`` for a
            malformed token.
    """
    authorizations = header_values(headers, "authorization")
    if not authorizations:
        raise MissingToken(ErrorCode.INVALID_TOKEN, "the request has no access token")
    if len(authorizations) > 1:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "the request has more than one Authorization header")
    name, _, rest = authorizations[0].strip(" \t").partition(" ")
    scheme = AUTH_SCHEMES.get(name.lower())  # auth-scheme is case-insensitive (RFC 7235 §2.1)
    if scheme is None:
        raise MissingToken(ErrorCode.INVALID_TOKEN, "the request has no DPoP or Bearer access token")
    token = rest.lstrip(" ")
    if TOKEN68.fullmatch(token) is None:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "the access token is malformed")
    return scheme, token


def _at_resource(url: str, resource_url: str) -> bool:
    try:
        return htu_normalize(url) == htu_normalize(resource_url)
    except ValueError:
        return False


def verify_resource_request(
    *,
    method: str,
    url: str,
    headers: RequestHeaders,
    keys: KeySet,
    issuer: str,
    now: int,
    query_params: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    resource_url: str | None = None,
    dpop_nonce: str | Collection[str] | None = None,
    require_nonce: bool = False,
    iat_window: tuple[int, int] = DEFAULT_DPOP_IAT_WINDOW,
    allowed_algs: Collection[str] = (REQUIRED_DPOP_ALGORITHM,),
    signatures: VerifiedSignatures | None = None,
) -> VerifiedCaller:
    """Run the stateless checks of one protected-resource request; see the module docstring.

    Args:
        method: The request method, e.g. ``"GET"``.
        url: The request URL as the agent addressed it: the company's public scheme, host
            and path (not the one a proxy forwarded to), with the query.
        headers: The request headers, repeats kept.
        keys: The issuer's signing keys (a joserfc ``KeySet`` from its JWKS).
        issuer: The tenant's issuer identifier.
        now: The current time, in seconds since the epoch.
        query_params: The parsed query, if the caller has it; else it is read from ``url``.
        resource_url: The MCP server's ``url`` when this endpoint is that MCP server; ``None``
            at every other endpoint.
        dpop_nonce: The nonce (or nonces, during rotation) the company issued, if any.
        require_nonce: Whether a proof must carry one of them (``use_dpop_nonce``).
        iat_window: Seconds a proof's ``iat`` may be before and after ``now``.
        allowed_algs: The DPoP algorithms the resource accepts (ES256 always).
        signatures: Session Tokens whose signature already verified against ``keys``
            (`VerifiedSignatures`); the proof is always verified.

    Returns:
        The token's claims, the scheme and the proof.

    Raises:
        MissingToken: ``invalid_token`` without a credential this resource understands.
        UnknownKeyId: ``invalid_token`` signed by a key not in ``keys``: refetch them once.
        ProtocolError: ``invalid_request``, ``invalid_token``, ``invalid_dpop_proof`` or
            ``use_dpop_nonce``.
        ValueError: For bad arguments (``url`` not an absolute http(s) URL, see
            :func:`verify_dpop_proof`).
    """
    if has_token_in_url(url, query_params):
        # PAP-4.3-17, RFC 6750 §2.3: refused even beside a valid header, so it is never habit.
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "access tokens are not accepted in the URL")
    scheme, token = authorization_credential(headers)
    if resource_url is not None and not _at_resource(url, resource_url):
        # Only the MCP server's own URL takes its tokens, not other paths on its host (PAP-4.3-10).
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "this URL is not the MCP server the token is for")
    if scheme is ChallengeScheme.BEARER and resource_url is None:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "this endpoint accepts DPoP-bound Session Tokens only")
    claims = verify_session_token(token, issuer=issuer, keys=keys, now=now, audience=resource_url,
                                  signatures=signatures)
    if scheme is ChallengeScheme.BEARER:
        if claims.cnf is not None:
            raise ProtocolError(ErrorCode.INVALID_TOKEN, "a DPoP-bound token must be sent with the DPoP scheme")
        return VerifiedCaller(claims=claims, scheme=scheme, proof=None)
    if claims.cnf is None:
        raise ProtocolError(ErrorCode.INVALID_TOKEN, "a Bearer token must be sent with the Bearer scheme")
    proofs = header_values(headers, "dpop")
    if len(proofs) != 1:
        raise ProtocolError(ErrorCode.INVALID_DPOP_PROOF, "the request needs exactly one DPoP header")
    proof = verify_dpop_proof(
        proofs[0],
        method=method,
        url=url,
        now=now,
        access_token=token,
        expected_jkt=claims.cnf.jkt,
        nonce=dpop_nonce,
        require_nonce=require_nonce,
        iat_window=iat_window,
        allowed_algs=allowed_algs,
    )
    return VerifiedCaller(claims=claims, scheme=scheme, proof=proof)
