"""Client assertions at the token endpoint (PAP §4.1, RFC 7523 §3, GUIDE-jwt-01..05).

Every refusal is ``invalid_client`` (PAP-4.1-05) with a description of Frontdoor's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol import (
    ClientAssertion,
    ErrorCode,
    ProtocolError,
    UnknownKeyId,
    verify_client_assertion,
)
from joserfc.jwk import JWKRegistry, Key, KeySet

from .jose_helpers import (
    CLIENT_ID,
    ISSUER,
    NOW,
    TOKEN_ENDPOINT,
    assertion_claims,
    ec_key,
    hs256_with_public_key,
    public,
    public_set,
    rsa_key,
    sign,
    unsigned,
)
from .pap_fixtures import load_fixture

AGENT_KEY = ec_key("key-1")
KEYS = public_set(AGENT_KEY)
HEADER = {"alg": "ES256", "typ": "JWT", "kid": "key-1"}


def _claims(**changes: Any) -> dict[str, Any]:
    claims = assertion_claims(sub=CLIENT_ID)
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _verify(assertion: str, keys: KeySet = KEYS, **options: Any) -> ClientAssertion:
    return verify_client_assertion(assertion, client_id=CLIENT_ID, issuer=ISSUER, keys=keys, now=NOW, **options)


def _refused(assertion: str, keys: KeySet = KEYS, **options: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        _verify(assertion, keys, **options)
    error = raised.value
    assert error.code is ErrorCode.INVALID_CLIENT
    assert error.status == 401
    # Never echoes the assertion or any claim value (conventions: errors).
    assert error.description is not None
    fragments = (assertion[:20], assertion.rsplit(".", maxsplit=1)[-1][:20], CLIENT_ID, ISSUER, "other-company")
    assert not any(fragment and fragment in error.description for fragment in fragments)
    return error


def test_pap_4_1_04_a_valid_client_assertion_is_accepted() -> None:
    """PAP-4.1-04/05: iss = sub = client_id, aud = the issuer as one string, ES256, kid named."""
    claims = _claims()
    result = _verify(sign(HEADER, claims, AGENT_KEY))
    assert result == ClientAssertion(jti=claims["jti"], exp=claims["exp"], iat=claims["iat"], kid="key-1")


def test_guide_jwt_01_rs256_with_a_2048_bit_key_is_accepted() -> None:
    """GUIDE-jwt-01: ES256 and RS256 are both supported."""
    key = rsa_key("rsa-1")
    result = _verify(sign({"alg": "RS256", "kid": "rsa-1"}, _claims(), key), public_set(AGENT_KEY, key))
    assert result.kid == "rsa-1"


def test_guide_jwt_01_an_rsa_key_under_2048_bits_is_refused() -> None:
    """GUIDE-jwt-01: RSA keys of at least 2048 bits."""
    key = rsa_key("rsa-weak", bits=1024)
    _refused(sign({"alg": "RS256", "kid": "rsa-weak"}, _claims(), key), public_set(key))


@pytest.mark.parametrize("typ", ["JWT", "jwt", "application/jwt", "client-authentication+jwt", None])
def test_rfc7519_5_1_typ_jwt_or_absent_is_accepted(typ: str | None) -> None:
    """RFC 7519 §5.1 (case-insensitive media type), draft-ietf-oauth-rfc7523bis explicit typ, or none."""
    header = {"alg": "ES256", "kid": "key-1"} | ({"typ": typ} if typ else {})
    assert _verify(sign(header, _claims(), AGENT_KEY)).kid == "key-1"


@pytest.mark.parametrize("typ", ["dpop+jwt", "poppy-browser+jwt", "at+jwt", 7])
def test_pap_5_05_other_jwt_types_are_not_client_assertions(typ: object) -> None:
    """PAP-5-05: a browser assertion, a DPoP proof or an access token is never a client assertion."""
    _refused(sign({**HEADER, "typ": typ}, _claims(), AGENT_KEY))


# PAP-4.1-05: aud -------------------------------------------------------------------


@pytest.mark.parametrize(
    "aud",
    [
        TOKEN_ENDPOINT,  # the token endpoint URL is refused by name
        "https://other-company.example/oauth/token",
        ISSUER + "/",
        ISSUER.upper(),
        "https://auth.frontdoor.example/shop-a?",
        "",
    ],
)
def test_pap_4_1_05_any_other_aud_is_refused_character_for_character(aud: str) -> None:
    """PAP-4.1-05: aud equals auth.issuer exactly; the token endpoint URL included."""
    error = _refused(sign(HEADER, _claims(aud=aud), AGENT_KEY))
    assert error.description == "client assertion aud is not this issuer"


@pytest.mark.parametrize("aud", [[ISSUER], [ISSUER, "https://other-company.example"], {"aud": ISSUER}, 3])
def test_pap_4_1_04_aud_must_be_a_single_string(aud: object) -> None:
    """PAP-4.1-04, GUIDE-jwt-04: an array, even holding only the issuer, is refused."""
    error = _refused(sign(HEADER, _claims(aud=aud), AGENT_KEY))
    assert error.description == "client assertion aud must be a single string"


def test_pap_4_1_05_missing_aud_is_refused() -> None:
    """PAP-4.1-05: no aud is "any other aud"."""
    claims = _claims()
    del claims["aud"]
    _refused(sign(HEADER, claims, AGENT_KEY))


# RFC 7523 §3: iss, sub -------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"iss": "https://stranger.example/client.json"},
        {"sub": "https://stranger.example/client.json"},
        {"iss": None},
        {"sub": None},
        {"sub": 42},
    ],
)
def test_rfc7523_3_iss_and_sub_are_the_client_id(changes: dict[str, Any]) -> None:
    """RFC 7523 §3 (private_key_jwt): iss and sub are both the client_id."""
    _refused(sign(HEADER, _claims(**changes), AGENT_KEY))


# GUIDE-jwt-04, PAP-4.2-08: times ---------------------------------------------------


def test_guide_jwt_04_expired_is_refused_and_skew_is_tolerated() -> None:
    """GUIDE-jwt-04: exp is checked, with a small clock skew."""
    _refused(sign(HEADER, assertion_claims(sub=CLIENT_ID, shift=-600), AGENT_KEY))
    # exp 30 s ago, within the 60 s skew: accepted; 61 s ago: refused.
    assert _verify(sign(HEADER, assertion_claims(sub=CLIENT_ID, shift=-90), AGENT_KEY))
    error = _refused(sign(HEADER, assertion_claims(sub=CLIENT_ID, shift=-121), AGENT_KEY))
    assert error.description == "client assertion has expired"


def test_guide_jwt_04_issued_in_the_future_is_refused_beyond_the_skew() -> None:
    """GUIDE-jwt-04: iat later than now plus the skew is refused; 10 s ahead is tolerated."""
    assert _verify(sign(HEADER, assertion_claims(sub=CLIENT_ID, shift=10), AGENT_KEY))
    error = _refused(sign(HEADER, assertion_claims(sub=CLIENT_ID, shift=300), AGENT_KEY))
    assert error.description == "client assertion is issued in the future"


def test_guide_jwt_04_a_long_lifetime_is_refused() -> None:
    """GUIDE-jwt-04: reject assertions that claim a long lifetime; 300 s is the bound."""
    assert _verify(sign(HEADER, assertion_claims(sub=CLIENT_ID, lifetime=300), AGENT_KEY))
    for lifetime in (301, 3600, 0, -5):
        error = _refused(sign(HEADER, assertion_claims(sub=CLIENT_ID, lifetime=lifetime), AGENT_KEY))
        assert error.description == "client assertion lifetime is not accepted"
    # A stricter caller bound applies too.
    _refused(sign(HEADER, assertion_claims(sub=CLIENT_ID, lifetime=120), AGENT_KEY), max_lifetime=60)


@pytest.mark.parametrize(
    "changes",
    [{"exp": None}, {"iat": None}, {"exp": str(NOW + 60)}, {"iat": True}, {"exp": 10**20}, {"iat": -1}],
)
def test_rfc7519_2_exp_and_iat_are_required_numeric_dates(changes: dict[str, Any]) -> None:
    """RFC 7519 §2, GUIDE-jwt-04: exp and iat are present and are numbers."""
    _refused(sign(HEADER, _claims(**changes), AGENT_KEY))


def test_rfc7519_4_1_5_nbf_in_the_future_is_refused() -> None:
    """RFC 7519 §4.1.5: not before nbf (with the skew)."""
    assert _verify(sign(HEADER, _claims(nbf=NOW + 30), AGENT_KEY))
    _refused(sign(HEADER, _claims(nbf=NOW + 120), AGENT_KEY))
    _refused(sign(HEADER, _claims(nbf="soon"), AGENT_KEY))


def test_fractional_times_are_rounded_safely() -> None:
    """RFC 7519 §2: NumericDate may be fractional; exp is rounded up for the replay store."""
    result = _verify(sign(HEADER, _claims(iat=NOW + 0.5, exp=NOW + 59.2), AGENT_KEY))
    assert (result.iat, result.exp) == (NOW, NOW + 60)


# GUIDE-jwt-05: jti -----------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "short", 12345678901234567890, "x" * 257, "sixteen with spaces"])
def test_guide_jwt_05_jti_is_required_and_long_enough(value: object) -> None:
    """GUIDE-jwt-05: a jti of at least 128 random bits; a missing, short or odd one is refused."""
    _refused(sign(HEADER, _claims(jti=value), AGENT_KEY))


# GUIDE-jwt-02: algorithms ----------------------------------------------------------


def test_guide_jwt_02_alg_none_is_refused() -> None:
    """GUIDE-jwt-02: never alg none (peer case security.client-assertion-alg-none)."""
    error = _refused(unsigned(HEADER, _claims()))
    assert error.description == "client assertion alg is not accepted"
    assert not isinstance(error, UnknownKeyId)


def test_guide_jwt_02_hs256_keyed_with_the_public_key_is_refused() -> None:
    """GUIDE-jwt-02: algorithm confusion, the public key as an HMAC secret."""
    _refused(hs256_with_public_key(HEADER, _claims(), public(AGENT_KEY)))


def test_guide_jwt_02_an_rs256_header_on_an_ec_key_is_refused() -> None:
    """GUIDE-jwt-01/02: alg must fit the key; not an unknown kid, so no refetch."""
    key = rsa_key("key-1")  # an attacker's RSA key, signing under the EC key's kid
    error = _refused(sign({**HEADER, "alg": "RS256"}, _claims(), key))
    assert error.description == "client assertion alg does not fit its key"
    assert not isinstance(error, UnknownKeyId)


def test_guide_jwt_01_es384_on_a_p256_key_is_refused() -> None:
    """An EC curve must fit the alg: ES384 needs P-384."""
    _refused(sign({**HEADER, "alg": "ES384"}, _claims(), ec_key("key-1", "P-384")), algorithms=("ES256", "ES384"))


def test_allowed_algorithms_are_public_key_only() -> None:
    """PAP-4.3-20/GUIDE-jwt-02: a caller cannot allow HS256 or none."""
    for algorithms in (("HS256",), ("ES256", "none"), ()):
        with pytest.raises(ValueError):
            _verify(sign(HEADER, _claims(), AGENT_KEY), algorithms=algorithms)


def test_an_alg_outside_the_callers_list_is_refused() -> None:
    """token_endpoint_auth_signing_alg_values_supported narrows what is accepted."""
    key = rsa_key("key-2")
    _refused(sign({"alg": "RS256", "kid": "key-2"}, _claims(), key), public_set(key), algorithms=("ES256",))


# GUIDE-jwt-03: keys only from the verified jwks_uri --------------------------------


def test_guide_jwt_03_an_embedded_key_is_refused() -> None:
    """GUIDE-jwt-03: a stranger's key in the jwk header never verifies (peer case embedded-key-ignored)."""
    stranger = ec_key("key-1")
    header = {**HEADER, "jwk": public(stranger).as_dict()}
    error = _refused(sign(header, _claims(), stranger))
    assert error.description == "client assertion must not carry or reference a key"


@pytest.mark.parametrize(
    "member",
    [
        {"jwk": {"kty": "EC"}},
        {"jku": "https://attacker.example/jwks"},
        {"x5u": "https://attacker.example/cert"},
        {"x5c": ["MIIB"]},
    ],
)
def test_guide_jwt_03_key_headers_are_refused_even_with_a_good_signature(member: dict[str, Any]) -> None:
    """GUIDE-jwt-03: ignore jku, x5u and embedded keys: here, refuse the assertion outright."""
    _refused(sign({**HEADER, **member}, _claims(), AGENT_KEY))


def test_rfc7515_4_1_11_crit_is_refused() -> None:
    """RFC 7515 §4.1.11: no extension is understood, so a crit header is refused."""
    _refused(sign({**HEADER, "crit": ["exp"], "exp": 1}, _claims(), AGENT_KEY))


def test_a_signature_by_another_key_is_refused() -> None:
    """RFC 7515 §5.2: the signature must verify with the client's key."""
    error = _refused(sign(HEADER, _claims(), ec_key("key-1")))
    assert error.description == "client assertion signature is invalid"


def test_a_tampered_payload_is_refused() -> None:
    """RFC 7515 §5.2: the signature covers the payload."""
    header, _, signature = sign(HEADER, _claims(), AGENT_KEY).split(".")
    other_payload = sign(HEADER, _claims(), AGENT_KEY).split(".")[1]
    _refused(f"{header}.{other_payload}.{signature}")


# GUIDE-keys-02: kid selection ------------------------------------------------------


def test_guide_keys_02_an_unknown_kid_is_signalled_for_a_refetch() -> None:
    """GUIDE-keys-02: an unknown kid raises UnknownKeyId (still invalid_client)."""
    rotated = ec_key("key-2")
    error = _refused(sign({**HEADER, "kid": "key-2"}, _claims(), rotated))
    assert isinstance(error, UnknownKeyId)
    # After the caller refetches the JWKS the same assertion verifies.
    assert _verify(sign({**HEADER, "kid": "key-2"}, _claims(), rotated), public_set(AGENT_KEY, rotated)).kid == "key-2"


def test_no_kid_uses_the_only_fitting_key() -> None:
    """RFC 7515 §4.1.4: kid is optional; without it the one key that fits is used."""
    other_type = rsa_key("rsa-1")
    result = _verify(sign({"alg": "ES256"}, _claims(), AGENT_KEY), public_set(AGENT_KEY, other_type))
    assert result.kid == "key-1"


def test_no_kid_with_several_fitting_keys_is_refused() -> None:
    """Without a kid and with two EC keys the choice is ambiguous: refused, not tried in turn."""
    error = _refused(sign({"alg": "ES256"}, _claims(), AGENT_KEY), public_set(AGENT_KEY, ec_key("key-2")))
    assert error.description == "client assertion must name its key with kid"
    assert not isinstance(error, UnknownKeyId)


def test_no_kid_and_no_fitting_key_is_signalled_for_a_refetch() -> None:
    """A key of the right type may have been added since the JWKS was fetched."""
    error = _refused(sign({"alg": "ES256"}, _claims(), AGENT_KEY), public_set(rsa_key("rsa-1")))
    assert isinstance(error, UnknownKeyId)


@pytest.mark.parametrize("params", [{"use": "enc"}, {"alg": "RS256"}, {"key_ops": ["encrypt"]}])
def test_rfc7517_4_key_use_ops_and_alg_must_allow_verification(params: dict[str, Any]) -> None:
    """RFC 7517 §4.2-§4.4: a key published for encryption or another alg does not verify."""
    key = ec_key("key-1")
    restricted = JWKRegistry.import_key({**public(key).as_dict(), **params})
    _refused(sign(HEADER, _claims(), key), KeySet([restricted]))


def test_key_use_sig_is_accepted() -> None:
    """RFC 7517 §4.2: use "sig" and alg ES256 on the key are fine."""
    key = ec_key("key-1", use="sig", alg="ES256")
    assert _verify(sign(HEADER, _claims(), key), public_set(key)).kid == "key-1"


# Malformed input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "",
        "a.b",
        "a.b.c.d",
        "not a jwt",
        "x" * 9000,
        "eyJhbGciOiJFUzI1NiJ9.e30=.AA",  # padding
        "eyJhbGciOiJFUzI1NiJ9.e30.A+A",  # standard alphabet
    ],
)
def test_malformed_assertions_are_refused(value: str) -> None:
    """Anything but three canonical base64url segments is refused, without echoing it."""
    _refused(value)


def test_guide_json_01_duplicate_header_members_are_refused() -> None:
    """GUIDE-json-01: a second alg cannot hide behind the first."""
    from .jose_helpers import b64

    header = b64(b'{"alg":"ES256","kid":"key-1","alg":"none"}')
    payload = sign(HEADER, _claims(), AGENT_KEY).split(".")[1]
    _refused(f"{header}.{payload}.")


def test_arguments_are_checked() -> None:
    """An empty client_id or issuer is a programming error, not a refusal."""
    with pytest.raises(ValueError):
        verify_client_assertion("a.b.c", client_id="", issuer=ISSUER, keys=KEYS, now=NOW)
    with pytest.raises(ValueError):
        _verify("a.b.c", max_lifetime=0)


# The peer suite's client-assertion mutations ---------------------------------------


def _peer_cases() -> list[dict[str, Any]]:
    document = load_fixture("conformance/security.json")
    cases = [case for case in document["cases"] if case.get("target") == "client_assertion"]
    assert len(cases) >= 7
    return cases


@pytest.mark.parametrize("case", _peer_cases(), ids=lambda case: case["id"])
def test_peer_security_client_assertion_cases(case: dict[str, Any]) -> None:
    """The peer suite's client-assertion mutations, built as its runner builds them, are refused."""
    mutation = case["mutation"]
    aud: Any = mutation.get("aud", ISSUER)
    if aud == "token_endpoint":
        aud = TOKEN_ENDPOINT
    if mutation.get("aud_array"):
        aud = [ISSUER, "https://other-company.example"]
    claims = assertion_claims(sub=CLIENT_ID, aud=aud)
    header: dict[str, Any] = dict(HEADER)
    signer: Key = AGENT_KEY
    if mutation.get("signer") == "stranger":
        signer = ec_key("key-1")
        if mutation.get("embed_jwk"):
            header["jwk"] = public(signer).as_dict()
    alg = mutation.get("alg", "ES256")
    if alg == "none":
        assertion = unsigned(header, claims)
    elif alg == "HS256":
        assertion = hs256_with_public_key(header, claims, public(AGENT_KEY))
    else:
        # The runner relabels an ES256 signature as RS256.
        es = sign(header, claims, signer)
        relabelled = sign({**header, "alg": alg}, claims, signer, alg="ES256")
        assertion = es if alg == "ES256" else relabelled
    error = _refused(assertion)
    assert error.code.value == case["expect"]["error"]
    assert error.status == case["expect"]["status"]
