"""DPoP proofs (RFC 9449 §4.3; PAP-4.3-02..07, PAP-4.3-19..21).

``invalid_dpop_proof`` for every failed check, ``use_dpop_nonce`` for the nonce; 400 at the
token endpoint and 401 with a ``DPoP`` challenge at a resource (RFC 9449 §5, §7.1).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from frontdoor_protocol import (
    DPoPProof,
    ErrorCode,
    ProtocolError,
    Surface,
    access_token_hash,
    jwk_thumbprint,
    verify_dpop_proof,
)
from joserfc.jwk import Key

from .jose_helpers import NOW, TOKEN_ENDPOINT, b64, ec_key, jti, okp_key, public, rsa_key, segment, sign
from .pap_fixtures import load_fixture

API_URL = "https://shop.example/api/orders"
TOKEN = "eyJhbGciOiJFUzI1NiJ9.session-token-value.sig"
AGENT_KEY = ec_key(None)
AGENT_JKT = jwk_thumbprint(public(AGENT_KEY).as_dict())


def _proof(
    key: Key = AGENT_KEY,
    *,
    htm: str = "GET",
    htu: str = API_URL,
    shift: int = 0,
    token: str | None = TOKEN,
    header: dict[str, Any] | None = None,
    claims: dict[str, Any] | None = None,
    alg: str = "ES256",
) -> str:
    protected = {"typ": "dpop+jwt", "alg": alg, "jwk": public(key).as_dict(), **(header or {})}
    body: dict[str, Any] = {"jti": jti(), "htm": htm, "htu": htu, "iat": NOW + shift}
    if token is not None:
        body["ath"] = b64(hashlib.sha256(token.encode()).digest())
    body.update(claims or {})
    protected = {name: value for name, value in protected.items() if value is not None}
    return sign(protected, {name: value for name, value in body.items() if value is not None}, key, alg=alg)


def _at_resource(proof: str, **options: Any) -> DPoPProof:
    arguments: dict[str, Any] = {"method": "GET", "url": API_URL, "access_token": TOKEN, "expected_jkt": AGENT_JKT}
    arguments.update(options)
    return verify_dpop_proof(proof, now=NOW, **arguments)


def _at_token_endpoint(proof: str, **options: Any) -> DPoPProof:
    return verify_dpop_proof(proof, method="POST", url=TOKEN_ENDPOINT, now=NOW, access_token=None, **options)


def _refused(call: Any, proof: str, code: ErrorCode = ErrorCode.INVALID_DPOP_PROOF, **options: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        call(proof, **options)
    error = raised.value
    assert error.code is code
    assert error.description is not None
    # Never echoes the token, the proof or a claim (fragments long enough to mean something).
    fragments = (TOKEN, proof[:24], proof.rsplit(".", maxsplit=1)[-1][:24], API_URL, "elsewhere")
    assert not any(len(fragment) >= 8 and fragment in error.description for fragment in fragments)
    return error


def test_pap_4_3_02_a_valid_proof_at_a_resource() -> None:
    """PAP-4.3-02/03/04/05/07: a fresh proof by the bound key, for this request, with ath."""
    proof = _proof()
    result = _at_resource(proof)
    assert result.jkt == AGENT_JKT == public(AGENT_KEY).thumbprint()
    assert (result.htm, result.htu, result.iat, result.alg, result.nonce) == ("GET", API_URL, NOW, "ES256", None)
    assert result.accept_until == NOW + 60
    assert len(result.jti) >= 16


def test_pap_4_3_02_a_valid_proof_at_the_token_endpoint() -> None:
    """At the token endpoint there is no access token and no ath; the jkt to bind is returned."""
    result = _at_token_endpoint(_proof(htm="POST", htu=TOKEN_ENDPOINT, token=None))
    assert result.jkt == AGENT_JKT


def test_error_statuses_depend_on_the_surface() -> None:
    """RFC 9449 §5 vs §7.1: 400 at the token endpoint, 401 with a DPoP challenge at a resource."""
    error = _refused(_at_resource, _proof(htm="POST"))
    assert error.status_at(Surface.OAUTH) == 400
    assert error.status_at(Surface.RESOURCE) == 401
    assert (error.challenge() or "").startswith('DPoP error="invalid_dpop_proof"')


# PAP-4.3-19: one well-formed JWT ---------------------------------------------------


def test_pap_4_3_19_two_proofs_in_one_header_are_refused() -> None:
    """PAP-4.3-19: a header holding two proofs (joined by a comma) is not one compact JWT."""
    _refused(_at_resource, f"{_proof()}, {_proof()}")


@pytest.mark.parametrize("value", ["", "abc", "a.b.c", "a.b.c.d.e", "x" * 9000])
def test_pap_4_3_19_malformed_proofs_are_refused(value: str) -> None:
    """PAP-4.3-19: anything but a well-formed compact JWS."""
    _refused(_at_resource, value)


@pytest.mark.parametrize("missing", ["jti", "htm", "htu", "iat"])
def test_pap_4_3_19_required_claims(missing: str) -> None:
    """PAP-4.3-19, RFC 9449 §4.2: jti, htm, htu and iat are required."""
    _refused(_at_resource, _proof(claims={missing: None}))


@pytest.mark.parametrize("value", ["short", "", 1234567890123456789, "x" * 257])
def test_rfc9449_4_2_jti_must_be_a_usable_replay_key(value: object) -> None:
    """RFC 9449 §4.2, §11.1: jti has enough entropy to key the replay cache."""
    _refused(_at_resource, _proof(claims={"jti": value}))


# PAP-4.3-20: typ, alg, jwk ---------------------------------------------------------


@pytest.mark.parametrize("typ", [None, "JWT", "at+jwt", "DPOP+JWT", "application/dpop+jwt"])
def test_pap_4_3_20_typ_is_dpop_jwt(typ: str | None) -> None:
    """PAP-4.3-20: typ is exactly dpop+jwt."""
    error = _refused(_at_resource, _proof(header={"typ": typ}))
    assert error.description == "DPoP proof typ must be dpop+jwt"


def test_pap_4_3_20_alg_none_is_refused() -> None:
    """PAP-4.3-20, GUIDE-jwt-02 (peer case dpop-alg-none)."""
    header, payload, _ = _proof().split(".")
    relabelled = segment({"typ": "dpop+jwt", "alg": "none", "jwk": public(AGENT_KEY).as_dict()})
    _refused(_at_resource, f"{relabelled}.{payload}.")
    assert header != relabelled


def test_pap_4_3_20_hmac_with_the_jwk_as_secret_is_refused() -> None:
    """PAP-4.3-20: an HMAC alg is never accepted, even if listed by mistake it cannot be."""
    protected = segment({"typ": "dpop+jwt", "alg": "HS256", "jwk": public(AGENT_KEY).as_dict()})
    payload = segment({"jti": jti(), "htm": "GET", "htu": API_URL, "iat": NOW})
    secret = json.dumps(public(AGENT_KEY).as_dict()).encode()
    mac = hmac.new(secret, f"{protected}.{payload}".encode(), hashlib.sha256).digest()
    _refused(_at_resource, f"{protected}.{payload}.{b64(mac)}")
    with pytest.raises(ValueError):
        _at_resource(_proof(), allowed_algs=("ES256", "HS256"))


def test_pap_3_2_09_only_listed_algorithms_are_accepted() -> None:
    """PAP-3.2-09, GUIDE-co-dpop-01: ES256 always; RS256 or Ed25519 only when the company lists them."""
    rsa = rsa_key()
    _refused(_at_resource, _proof(rsa, alg="RS256"), expected_jkt=None)
    assert _at_resource(_proof(rsa, alg="RS256"), expected_jkt=None, allowed_algs=("ES256", "RS256")).alg == "RS256"
    ed = okp_key()
    assert (
        _at_resource(_proof(ed, alg="Ed25519"), expected_jkt=None, allowed_algs=("ES256", "Ed25519")).alg == "Ed25519"
    )
    assert _at_resource(_proof(ed, alg="EdDSA"), expected_jkt=None, allowed_algs=("ES256", "EdDSA")).alg == "EdDSA"


@pytest.mark.parametrize("member", ["d", "p", "q", "dp", "dq", "qi", "oth", "k"])
def test_pap_4_3_20_a_private_jwk_is_refused(member: str) -> None:
    """PAP-4.3-20: jwk holds a public key and no private key."""
    jwk = {**public(AGENT_KEY).as_dict(), member: "AAAA"}
    error = _refused(_at_resource, _proof(header={"jwk": jwk}))
    assert error.description == "DPoP proof jwk must hold a public key only"


def test_pap_4_3_20_the_whole_private_key_is_refused() -> None:
    """PAP-4.3-20: a proof that ships its private key in jwk is refused."""
    _refused(_at_resource, _proof(header={"jwk": AGENT_KEY.as_dict(private=True)}))


@pytest.mark.parametrize(
    "jwk",
    [
        None,
        "not-a-jwk",
        {"kty": "EC"},
        {"kty": "oct"},
        {"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"},  # not on the curve
        {"kty": "XYZ", "crv": "P-256"},
    ],
)
def test_pap_4_3_20_jwk_must_be_a_valid_public_key(jwk: object) -> None:
    """PAP-4.3-20: a missing, incomplete or invalid jwk is refused."""
    _refused(_at_resource, _proof(header={"jwk": jwk}) if jwk is not None else _proof_without_jwk())


def _proof_without_jwk() -> str:
    return sign(
        {"typ": "dpop+jwt", "alg": "ES256"}, {"jti": jti(), "htm": "GET", "htu": API_URL, "iat": NOW}, AGENT_KEY
    )


def test_pap_4_3_20_jwk_type_and_curve_must_fit_alg() -> None:
    """PAP-4.3-20: an ES256 header with a P-384 or RSA jwk is refused."""
    p384 = ec_key(None, "P-384")
    _refused(_at_resource, _proof(p384, alg="ES384", header={"alg": "ES256"}), expected_jkt=None)
    _refused(_at_resource, _proof(rsa_key(), alg="RS256", header={"alg": "ES256"}), expected_jkt=None)
    jwk = {**public(AGENT_KEY).as_dict(), "use": "enc"}
    _refused(_at_resource, _proof(header={"jwk": jwk}))


@pytest.mark.parametrize("member", [{"jku": "https://a.example/k"}, {"x5u": "https://a.example/c"}, {"x5c": ["MII"]}])
def test_pap_4_3_20_the_key_is_the_jwk_only(member: dict[str, Any]) -> None:
    """PAP-4.3-20: no key by reference beside jwk."""
    _refused(_at_resource, _proof(header=member))


# PAP-4.3-02: the signature ---------------------------------------------------------


def test_pap_4_3_02_a_signature_by_another_key_is_refused() -> None:
    """PAP-4.3-02: the signature verifies with the key in the header (peer case dpop-wrong-signature)."""
    first, second = _proof(), _proof()
    error = _refused(_at_resource, ".".join([*first.split(".")[:2], second.split(".")[2]]))
    assert error.description == "DPoP proof signature is invalid"
    attacker = ec_key(None)
    forged = sign(
        {"typ": "dpop+jwt", "alg": "ES256", "jwk": public(AGENT_KEY).as_dict()},
        {"jti": jti(), "htm": "GET", "htu": API_URL, "iat": NOW, "ath": access_token_hash(TOKEN)},
        attacker,
    )
    _refused(_at_resource, forged)


# PAP-4.3-04: htm and htu -----------------------------------------------------------


@pytest.mark.parametrize("htm", ["POST", "get", "GET ", "HEAD"])
def test_pap_4_3_04_htm_must_match(htm: str) -> None:
    """PAP-4.3-04: htm equals the request method (peer case dpop-method-mismatch)."""
    error = _refused(_at_resource, _proof(htm=htm))
    assert error.description == "DPoP proof htm does not match the request"


@pytest.mark.parametrize(
    "htu",
    [
        "https://elsewhere.example/api/orders",  # peer case dpop-url-mismatch
        "https://shop.example:8443/api/orders",
        "http://shop.example/api/orders",
        "https://shop.example/API/orders",
        "https://shop.example/api/orders/",
        "https://shop.example/api",
        "https://user@shop.example/api/orders",
        "https://shop.example/api/orders\t",
        "shop.example/api/orders",
    ],
)
def test_pap_4_3_04_htu_must_match(htu: str) -> None:
    """PAP-4.3-04: another host, port, scheme or path (paths are case-sensitive) is refused."""
    _refused(_at_resource, _proof(htu=htu))


@pytest.mark.parametrize("htu", ["https://shop.example/api/orders?id=1", "https://shop.example/api/orders#x"])
def test_rfc9449_4_2_htu_has_no_query_or_fragment(htu: str) -> None:
    """RFC 9449 §4.2: htu is the target URI without query and fragment parts."""
    error = _refused(_at_resource, _proof(htu=htu), url=htu)
    assert error.description == "DPoP proof htu must have no query or fragment"


@pytest.mark.parametrize(
    "htu",
    [
        "HTTPS://SHOP.EXAMPLE/api/orders",
        "https://shop.example:443/api/orders",
        "https://shop.example/api/./orders",
        "https://shop.example/api/%6Frders",
    ],
)
def test_rfc9449_4_3_htu_is_compared_after_normalization(htu: str) -> None:
    """RFC 9449 §4.3 with RFC 3986 §6.2.2-6.2.3: case of scheme and host, default port, dots, encodings."""
    assert _at_resource(_proof(htu=htu)).htu == htu


def test_rfc9449_4_3_the_request_query_is_ignored() -> None:
    """RFC 9449 §4.3 check 9: the request's query and fragment are ignored."""
    assert _at_resource(_proof(), url=API_URL + "?page=2")


def test_the_request_url_must_be_usable() -> None:
    """A request URL that is not absolute http(s) is the caller's bug: ValueError."""
    with pytest.raises(ValueError):
        _at_resource(_proof(), url="/api/orders")


# PAP-4.3-05: the acceptance window -------------------------------------------------


@pytest.mark.parametrize("shift", [-300, -61, 61, 3600])
def test_pap_4_3_05_iat_outside_the_window_is_refused(shift: int) -> None:
    """PAP-4.3-05: "such as one minute" either way (peer case dpop-stale: 300 s old)."""
    error = _refused(_at_resource, _proof(shift=shift))
    assert error.description == "DPoP proof iat is outside the acceptance window"


@pytest.mark.parametrize("shift", [-60, -5, 0, 5, 60])
def test_pap_4_3_05_iat_inside_the_window_is_accepted(shift: int) -> None:
    """PAP-4.3-05: within the window is accepted; accept_until tells the replay cache how long."""
    assert _at_resource(_proof(shift=shift)).accept_until == NOW + shift + 60


def test_pap_4_3_05_the_window_is_configurable() -> None:
    """A company may choose its own window."""
    _refused(_at_resource, _proof(shift=-30), iat_window=(20, 5))
    assert _at_resource(_proof(shift=-200), iat_window=(300, 5)).accept_until == NOW + 100
    with pytest.raises(ValueError):
        _at_resource(_proof(), iat_window=(-1, 5))


@pytest.mark.parametrize("iat", ["1780000000", True, None, 1.5e20])
def test_rfc9449_4_2_iat_is_a_numeric_date(iat: object) -> None:
    """RFC 9449 §4.2: iat is a NumericDate."""
    _refused(_at_resource, _proof(claims={"iat": iat}))


# PAP-4.3-07: ath -------------------------------------------------------------------


def test_pap_4_3_07_no_ath_at_the_token_endpoint() -> None:
    """PAP-4.3-07 (peer case token-dpop-with-ath): a token-endpoint proof with ath is refused."""
    error = _refused(_at_token_endpoint, _proof(htm="POST", htu=TOKEN_ENDPOINT, token="some-token"))
    assert error.description == "DPoP proof must not have ath at the token endpoint"
    assert error.status == 400


def test_pap_4_3_07_ath_must_match_the_token() -> None:
    """PAP-4.3-07 (peer case dpop-token-hash-mismatch): ath is the hash of this token."""
    _refused(_at_resource, _proof(token="another-token"))
    _refused(_at_resource, _proof(token=None))
    _refused(_at_resource, _proof(claims={"ath": 7}))
    _refused(_at_resource, _proof(claims={"ath": "caf\u00e9"}))


def test_rfc9449_4_2_ath_is_base64url_sha256_of_the_ascii_token() -> None:
    """RFC 9449 §4.2: ath = base64url(SHA-256(ASCII(access token)))."""
    assert access_token_hash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU") == b64(
        hashlib.sha256(b"Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU").digest()
    )
    # RFC 9449 §7.1 example: this token's ath.
    assert (
        access_token_hash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
        == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
    )


# PAP-4.3-03: the bound key ---------------------------------------------------------


def test_pap_4_3_03_the_proof_key_must_be_the_bound_one() -> None:
    """PAP-4.3-03 (peer case dpop-other-key): another user's key is refused."""
    other = ec_key(None)
    error = _refused(_at_resource, _proof(other))
    assert error.description == "DPoP proof key is not the one the token is bound to"
    assert _at_resource(_proof(other), expected_jkt=None).jkt != AGENT_JKT


# PAP-4.3-21: nonces ----------------------------------------------------------------


def test_pap_4_3_21_a_required_nonce_missing_is_use_dpop_nonce() -> None:
    """PAP-4.3-21, RFC 9449 §8: no nonce when one is required: use_dpop_nonce, 401 at a resource."""
    error = _refused(_at_resource, _proof(), ErrorCode.USE_DPOP_NONCE, nonce="n-1", require_nonce=True)
    assert error.status_at(Surface.RESOURCE) == 401
    assert error.entry.companion_header == "DPoP-Nonce"


def test_pap_4_3_21_a_wrong_nonce_is_use_dpop_nonce() -> None:
    """PAP-4.3-21: a nonce the company did not issue (or no longer accepts)."""
    _refused(_at_resource, _proof(claims={"nonce": "n-0"}), ErrorCode.USE_DPOP_NONCE, nonce="n-1", require_nonce=True)
    # Not required, but carried and stale: still asked to retry with a fresh one.
    _refused(_at_resource, _proof(claims={"nonce": "n-0"}), ErrorCode.USE_DPOP_NONCE, nonce="n-1")


def test_pap_4_3_21_issued_nonces_are_accepted() -> None:
    """PAP-4.3-21: the current nonce, or the previous one during rotation, is accepted."""
    assert _at_resource(_proof(claims={"nonce": "n-1"}), nonce="n-1", require_nonce=True).nonce == "n-1"
    assert _at_resource(_proof(claims={"nonce": "n-0"}), nonce=("n-0", "n-1"), require_nonce=True).nonce == "n-0"
    assert _at_resource(_proof(), nonce="n-1").nonce is None
    assert _at_resource(_proof(claims={"nonce": "any"})).nonce == "any"


def test_pap_4_3_21_the_nonce_is_checked_last() -> None:
    """An otherwise invalid proof is invalid_dpop_proof, so the agent is not sent to retry it."""
    _refused(_at_resource, _proof(token="another"), nonce="n-1", require_nonce=True)
    _refused(_at_resource, _proof(claims={"nonce": 5}), nonce="n-1")
    with pytest.raises(ValueError):
        _at_resource(_proof(), require_nonce=True)


# The peer suite's proof mutations --------------------------------------------------

# Decided by the caller, not by this pure check: a second use (replay cache), no header,
# or the Bearer scheme with a DPoP-bound token.
_CALLERS_CASES = {"replay", "omit", "scheme"}


def _peer_cases() -> list[dict[str, Any]]:
    document = load_fixture("conformance/security.json")
    cases = [case for case in document["cases"] if case.get("target") in {"resource_dpop", "token_dpop"}]
    assert len(cases) >= 12
    return [case for case in cases if _CALLERS_CASES.isdisjoint(case["mutation"])]


@pytest.mark.parametrize("case", _peer_cases(), ids=lambda case: case["id"])
def test_peer_security_dpop_cases(case: dict[str, Any]) -> None:
    """The peer suite's proof mutations, built as its runner builds them, are refused as it expects."""
    mutation = case["mutation"]
    at_token_endpoint = case["target"] == "token_dpop"
    call = _at_token_endpoint if at_token_endpoint else _at_resource
    method, url = ("POST", TOKEN_ENDPOINT) if at_token_endpoint else ("GET", API_URL)
    if mutation.get("alg") == "none":
        header = segment({"typ": "dpop+jwt", "alg": "none", "jwk": public(AGENT_KEY).as_dict()})
        proof = f"{header}.{_proof().split('.')[1]}."
    elif mutation.get("tamper_signature"):
        proof = ".".join([*_proof().split(".")[:2], _proof().split(".")[2]])
    elif mutation.get("key") == "other":
        proof = _proof(ec_key(None))
    elif "ath" in mutation:
        proof = _proof(htm=method, htu=url, token=mutation["ath"])
    else:
        proof = _proof(
            htm=mutation.get("htm", method), htu=mutation.get("htu", url), shift=mutation.get("iat_offset", 0)
        )
    error = _refused(call, proof)
    surface = Surface.OAUTH if at_token_endpoint else Surface.RESOURCE
    assert (error.status_at(surface), error.code.value) == (case["expect"]["status"], case["expect"]["error"])
