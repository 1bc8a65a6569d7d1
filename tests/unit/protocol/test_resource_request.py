"""A protected-resource request (PAP §4.3, §6; RFC 6750 §2-§3; RFC 9449 §7).

Each refusal is asserted with its code, its resource status (401/400) and that it quotes
nothing from the request. Tokens are minted with the issuer's minting code and joserfc EC
keys; DPoP proofs are made with joserfc's JWT encoder, as an agent would.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any

import pytest
from frontdoor_protocol import (
    ChallengeScheme,
    Confirmation,
    ErrorCode,
    MissingToken,
    ProtocolError,
    SessionTokenClaims,
    Surface,
    UnknownKeyId,
    VerifiedCaller,
    header_values,
    jwk_thumbprint,
    mint_session_token,
    verify_resource_request,
)
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from .jose_helpers import CLIENT_ID, ISSUER, NOW, ec_key, public_set

ISSUER_KEY = ec_key("iss-1")
KEYS = public_set(ISSUER_KEY)
AGENT_KEY = ec_key(None)
AGENT_JKT = jwk_thumbprint(AGENT_KEY.as_dict(private=False))
API_URL = "https://shop.example/api/orders"
MCP_URL = "https://shop.example/mcp"


def _claims(**changes: Any) -> SessionTokenClaims:
    base: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "usr_3q2-7wXyZ_abcdEFGH12",
        "aud": ISSUER,
        "client_id": CLIENT_ID,
        "sid": "ses_01JABCDEF",
        "jti": secrets.token_urlsafe(16),
        "iat": NOW,
        "exp": NOW + 3600,
        "cnf": Confirmation(jkt=AGENT_JKT),
    }
    return SessionTokenClaims(**{**base, **changes})


def _token(**changes: Any) -> str:
    return mint_session_token(_claims(**changes), ISSUER_KEY, "iss-1")


TOKEN = _token()
MCP_BEARER = _token(aud=MCP_URL, resource=MCP_URL, cnf=None)
MCP_DPOP = _token(aud=MCP_URL, resource=MCP_URL)


def _ath(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def _proof(
    method: str = "GET", url: str = API_URL, *, token: str | None = TOKEN, key: ECKey = AGENT_KEY, **claims: Any
) -> str:
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
    payload: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": NOW}
    if token is not None:
        payload["ath"] = _ath(token)
    payload.update(claims)
    return jwt.encode(header, payload, key)


def _dpop(token: str = TOKEN, proof: str | None = None, *, url: str = API_URL) -> list[tuple[str, str]]:
    return [("Authorization", f"DPoP {token}"), ("DPoP", proof or _proof(url=url, token=token))]


def _verify(headers: Any, *, url: str = API_URL, method: str = "GET", **options: Any) -> VerifiedCaller:
    arguments: dict[str, Any] = {"keys": KEYS, **options}
    return verify_resource_request(method=method, url=url, headers=headers, issuer=ISSUER, now=NOW + 5, **arguments)


def _refused(headers: Any, code: ErrorCode, status: int, **options: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        _verify(headers, **options)
    error = raised.value
    assert error.code is code, error
    assert error.status_at(Surface.RESOURCE) == status
    assert error.description is not None
    for _, value in headers if isinstance(headers, list) else []:
        assert value[-20:] not in error.description  # never quotes a token or a proof
    return error


def test_pap_4_3_01_a_dpop_request_is_verified() -> None:
    """PAP-4.3-01/02/03/07: DPoP scheme, a proof by the bound key with ath; the claims come back."""
    caller = _verify(_dpop())
    assert caller.scheme is ChallengeScheme.DPOP
    assert caller.claims.sid == "ses_01JABCDEF"
    assert caller.proof is not None and caller.proof.jkt == AGENT_JKT


def test_pap_4_3_17_a_token_in_the_url_is_refused() -> None:
    """PAP-4.3-17, RFC 6750 §2.3: a query access_token is refused, even beside a valid header."""
    error = _refused([], ErrorCode.INVALID_REQUEST, 400, url=f"{API_URL}?access_token={TOKEN}")
    assert TOKEN[-20:] not in str(error)
    _refused(_dpop(), ErrorCode.INVALID_REQUEST, 400, url=f"{API_URL}?x=1&access_token=abc")
    _refused(_dpop(), ErrorCode.INVALID_REQUEST, 400, query_params={"access_token": "abc"})
    _refused(_dpop(), ErrorCode.INVALID_REQUEST, 400, query_params=[("access_token", "")])
    assert _verify(_dpop(), url=f"{API_URL}?page=2").claims.sub  # other parameters are fine


def test_pap_4_3_12_cookies_are_neither_needed_nor_read() -> None:
    """PAP-4.3-12: the header alone works; a cookie never stands in for it."""
    assert _verify([*_dpop(), ("Cookie", "session=abc")]).scheme is ChallengeScheme.DPOP
    error = _refused([("Cookie", f"access_token={TOKEN}")], ErrorCode.INVALID_TOKEN, 401)
    assert isinstance(error, MissingToken)


def test_rfc6750_3_1_no_credential_is_a_missing_token() -> None:
    """RFC 6750 §3.1: no Authorization, or an unsupported scheme, is a bare invalid_token."""
    assert isinstance(_refused([], ErrorCode.INVALID_TOKEN, 401), MissingToken)
    basic = [("Authorization", "Basic dXNlcjpwYXNz")]
    assert isinstance(_refused(basic, ErrorCode.INVALID_TOKEN, 401), MissingToken)


def test_rfc6750_3_1_two_authorization_headers_are_invalid_request() -> None:
    """RFC 6750 §3.1: more than one credential is invalid_request."""
    headers = [*_dpop(), ("Authorization", f"DPoP {TOKEN}")]
    assert not isinstance(_refused(headers, ErrorCode.INVALID_REQUEST, 400), MissingToken)


def test_rfc7235_a_malformed_credential_is_invalid_token() -> None:
    """RFC 7235 §2.1: the credential is a token68; anything else is invalid_token."""
    for value in ("DPoP", "DPoP ", "DPoP a b", 'DPoP "quoted"'):
        error = _refused([("Authorization", value), ("DPoP", _proof())], ErrorCode.INVALID_TOKEN, 401)
        assert not isinstance(error, MissingToken)


def test_rfc7235_the_scheme_is_case_insensitive() -> None:
    """RFC 7235 §2.1: auth-scheme is case-insensitive."""
    assert _verify([("authorization", f"dpop {TOKEN}"), ("dpop", _proof())]).scheme is ChallengeScheme.DPOP


def test_pap_4_3_11_a_dpop_token_sent_as_bearer_is_invalid_token() -> None:
    """PAP-4.3-11, RFC 9449 §7.1: at an API, and at its own MCP server."""
    _refused([("Authorization", f"Bearer {TOKEN}"), ("DPoP", _proof())], ErrorCode.INVALID_TOKEN, 401)
    headers = [("Authorization", f"Bearer {MCP_DPOP}"), ("DPoP", _proof("POST", MCP_URL, token=MCP_DPOP))]
    _refused(headers, ErrorCode.INVALID_TOKEN, 401, url=MCP_URL, method="POST", resource_url=MCP_URL)


def test_pap_4_3_19_exactly_one_dpop_header() -> None:
    """PAP-4.3-19: none, or two, is invalid_dpop_proof."""
    _refused([("Authorization", f"DPoP {TOKEN}")], ErrorCode.INVALID_DPOP_PROOF, 401)
    _refused([*_dpop(), ("DPoP", _proof())], ErrorCode.INVALID_DPOP_PROOF, 401)


@pytest.mark.parametrize(
    ("requirement", "proof"),
    [
        ("PAP-4.3-03", lambda: _proof(key=ec_key(None))),
        ("PAP-4.3-04 htm", lambda: _proof("POST")),
        ("PAP-4.3-04 htu", lambda: _proof(url="https://elsewhere.example/api/orders")),
        ("PAP-4.3-05", lambda: _proof(iat=NOW - 300)),
        ("PAP-4.3-07", lambda: _proof(token="another-token")),
        ("PAP-4.3-07 no ath", lambda: _proof(token=None)),
    ],
)
def test_pap_4_3_a_bad_proof_is_invalid_dpop_proof(requirement: str, proof: Any) -> None:
    """PAP-4.3-03/04/05/07: the proof's key, method, URL, time and ath are checked at a resource."""
    _refused(_dpop(proof=proof()), ErrorCode.INVALID_DPOP_PROOF, 401)


def test_pap_4_3_21_a_required_nonce() -> None:
    """PAP-4.3-21: without the company's nonce, use_dpop_nonce; with it, accepted."""
    _refused(_dpop(), ErrorCode.USE_DPOP_NONCE, 401, dpop_nonce="n-1", require_nonce=True)
    accepted = _verify(_dpop(proof=_proof(nonce="n-1")), dpop_nonce=("n-1", "n-0"), require_nonce=True)
    assert accepted.proof is not None and accepted.proof.nonce == "n-1"


def test_pap_4_3_10_a_bearer_token_works_only_at_its_mcp_server() -> None:
    """PAP-4.3-10: accepted at the MCP server whose url is its resource, refused everywhere else."""
    bearer = [("Authorization", f"Bearer {MCP_BEARER}")]
    caller = _verify(bearer, url=MCP_URL, method="POST", resource_url=MCP_URL)
    assert (caller.scheme, caller.proof, caller.claims.resource) == (ChallengeScheme.BEARER, None, MCP_URL)
    _refused(bearer, ErrorCode.INVALID_TOKEN, 401)  # an API of the company
    _refused(
        [("Authorization", f"DPoP {MCP_BEARER}"), ("DPoP", _proof(token=MCP_BEARER))], ErrorCode.INVALID_TOKEN, 401
    )
    other = "https://shop.example/mcp/other"  # another path on the same host
    _refused(bearer, ErrorCode.INVALID_TOKEN, 401, url=other, resource_url=MCP_URL)
    _refused(bearer, ErrorCode.INVALID_TOKEN, 401, url=other, resource_url=other)  # another MCP server


def test_pap_4_3_10_an_unbound_token_sent_as_dpop_is_invalid_token() -> None:
    """A Bearer MCP token keeps its scheme: sent as DPoP, even at its server, it is refused."""
    headers = [("Authorization", f"DPoP {MCP_BEARER}"), ("DPoP", _proof("POST", MCP_URL, token=MCP_BEARER))]
    _refused(headers, ErrorCode.INVALID_TOKEN, 401, url=MCP_URL, method="POST", resource_url=MCP_URL)


def test_pap_4_3_23_a_dpop_mcp_token_needs_its_proof() -> None:
    """PAP-4.3-23: a DPoP token for a DPoP MCP server is verified like an API's; without a proof it is refused."""
    headers = [("Authorization", f"DPoP {MCP_DPOP}"), ("DPoP", _proof("POST", MCP_URL, token=MCP_DPOP))]
    caller = _verify(headers, url=MCP_URL, method="POST", resource_url=MCP_URL)
    assert caller.scheme is ChallengeScheme.DPOP and caller.claims.resource == MCP_URL
    _refused(headers[:1], ErrorCode.INVALID_DPOP_PROOF, 401, url=MCP_URL, method="POST", resource_url=MCP_URL)
    _refused(_dpop(MCP_DPOP), ErrorCode.INVALID_TOKEN, 401)  # and refused at an API


def test_pap_6_05_an_mcp_server_takes_only_tokens_issued_for_its_url() -> None:
    """PAP-6-05: an ordinary Session Token (aud = the issuer) is refused at an MCP server."""
    headers = _dpop(proof=_proof("POST", MCP_URL))
    _refused(headers, ErrorCode.INVALID_TOKEN, 401, url=MCP_URL, method="POST", resource_url=MCP_URL)


def test_bearer_is_refused_at_an_api_without_looking_at_the_token() -> None:
    """PAP-4.3-11: APIs take DPoP only; a Bearer credential there costs no key lookup (no JWKS refetch)."""
    error = _refused([("Authorization", f"Bearer {TOKEN}")], ErrorCode.INVALID_TOKEN, 401, keys=KeySet([]))
    assert not isinstance(error, UnknownKeyId)


def test_another_issuers_or_a_forged_token_is_invalid_token() -> None:
    """RFC 9068 §4: a token of another issuer, or signed by another key, is invalid_token."""
    other = mint_session_token(
        _claims(iss="https://auth.frontdoor.example/shop-b", aud="https://auth.frontdoor.example/shop-b"),
        ISSUER_KEY,
        "iss-1",
    )
    _refused(_dpop(other), ErrorCode.INVALID_TOKEN, 401)
    forged = mint_session_token(_claims(), ec_key("iss-1"), "iss-1")
    _refused(_dpop(forged), ErrorCode.INVALID_TOKEN, 401)


def test_an_unknown_kid_asks_for_a_key_refetch() -> None:
    """GUIDE-keys-02: an unknown kid raises UnknownKeyId (still invalid_token) so the caller refetches."""
    rotated = mint_session_token(_claims(), ec_key("iss-2"), "iss-2")
    with pytest.raises(UnknownKeyId) as raised:
        _verify(_dpop(rotated))
    assert raised.value.code is ErrorCode.INVALID_TOKEN


def test_header_values_reads_every_shape() -> None:
    """Pairs keep repeats; a mapping compares names case-insensitively; getall multi-maps are used."""

    class MultiMap:
        def __init__(self, pairs: list[tuple[str, str]]) -> None:
            self.pairs = pairs

        def getall(self, key: str, default: list[str]) -> list[str]:
            return [v for k, v in self.pairs if k.lower() == key.lower()] or default

    pairs = [("DPoP", "a"), ("dpop", "b"), ("Host", "x")]
    assert header_values(pairs, "dpop") == ["a", "b"]
    assert header_values({"DPoP": "a", "dpop": "b"}, "DPOP") == ["a", "b"]
    assert header_values(MultiMap(pairs), "DPoP") == ["a", "b"]
    assert header_values(MultiMap(pairs), "cookie") == []
    assert _verify(MultiMap(_dpop())).scheme is ChallengeScheme.DPOP
    assert _verify(dict(_dpop())).scheme is ChallengeScheme.DPOP


def test_the_challenge_is_the_resource_one() -> None:
    """RFC 9449 §7.1: 401 with a DPoP challenge carrying the error."""
    error = _refused([("Authorization", f"DPoP {TOKEN}")], ErrorCode.INVALID_DPOP_PROOF, 401)
    challenge = error.challenge(ChallengeScheme.DPOP, algs=("ES256",))
    assert challenge is not None and challenge.startswith('DPoP error="invalid_dpop_proof"')
    assert 'algs="ES256"' in challenge
