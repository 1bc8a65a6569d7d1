"""The login handoff messages (ADR 0002): one rule per test.

Requests are signed by the issuer's key, responses by the company's; forged or odd values
are built by hand with ``jose_helpers`` exactly as an attacker would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from frontdoor_protocol.login_handoff import (
    LOGIN_REQUEST_TYPE,
    LOGIN_RESPONSE_TYPE,
    LoginHandoffError,
    LoginHandoffReason,
    LoginRequest,
    LoginResponse,
    build_login_request_claims,
    build_login_response_claims,
    login_callback_url,
    login_key_set,
    login_origin,
    login_public_key,
    sign_login_request,
    sign_login_response,
    verify_login_request,
    verify_login_response,
)
from joserfc.jwk import KeySet

from .jose_helpers import ISSUER, NOW, ec_key, hs256_with_public_key, jti, public, public_set, rsa_key, sign, unsigned

LOGIN_URL = "https://login.shop.example/signin"
ORIGIN = "https://login.shop.example"
CALLBACK = f"{ISSUER}/login/callback"
ISSUER_KEY = ec_key("issuer-1")
COMPANY_KEY = ec_key("company-1")
ISSUER_KEYS = public_set(ISSUER_KEY)
COMPANY_KEYS = public_set(COMPANY_KEY)
REQUEST_JTI = "req_" + "a" * 40
ACCOUNT = "acct_ada"
R = LoginHandoffReason


def _request_claims(**changes: Any) -> dict[str, Any]:
    claims = build_login_request_claims(
        issuer=ISSUER, login_url=LOGIN_URL, return_to=CALLBACK, agent_name="Poppy Assistant",
        scopes=("poppy:read", "orders:read"), jti=REQUEST_JTI, now=NOW,
    )
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _response_claims(**changes: Any) -> dict[str, Any]:
    claims = build_login_response_claims(
        account_id=ACCOUNT, request_jti=REQUEST_JTI, login_origin=ORIGIN, issuer=ISSUER, jti=jti(), now=NOW
    )
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


RESPONSE_HEADER = {"alg": "ES256", "typ": LOGIN_RESPONSE_TYPE, "kid": "company-1"}
REQUEST_HEADER = {"alg": "ES256", "typ": LOGIN_REQUEST_TYPE, "kid": "issuer-1"}


def _verify_response(token: str, keys: KeySet = COMPANY_KEYS, **options: Any) -> LoginResponse:
    arguments: dict[str, Any] = {
        "keys": keys, "expected_issuer": ORIGIN, "audience": ISSUER, "expected_request_jti": REQUEST_JTI, "now": NOW,
    }
    arguments.update(options)
    return verify_login_response(token, **arguments)


def _response_refused(token: str, keys: KeySet = COMPANY_KEYS, **options: Any) -> LoginHandoffError:
    with pytest.raises(LoginHandoffError) as raised:
        _verify_response(token, keys, **options)
    return raised.value


def _verify_request(token: str, **options: Any) -> LoginRequest:
    arguments: dict[str, Any] = {"keys": ISSUER_KEYS, "issuer": ISSUER, "login_origin": ORIGIN, "now": NOW}
    arguments.update(options)
    return verify_login_request(token, **arguments)


def _request_refused(token: str, **options: Any) -> LoginHandoffError:
    with pytest.raises(LoginHandoffError) as raised:
        _verify_request(token, **options)
    return raised.value


# The request ----------------------------------------------------------------------------


def test_a_signed_request_verifies_on_the_login_page() -> None:
    token = sign_login_request(_request_claims(), ISSUER_KEY, "issuer-1")
    assert _verify_request(token) == LoginRequest(
        return_to=CALLBACK, agent_name="Poppy Assistant", scopes=("poppy:read", "orders:read"), jti=REQUEST_JTI,
        exp=NOW + 120,
    )


def test_the_request_carries_exactly_the_claims_of_the_contract() -> None:
    assert set(_request_claims()) == {"iss", "aud", "jti", "iat", "exp", "return_to", "agent_name", "scope"}
    assert _request_claims()["scope"] == "poppy:read orders:read"


def test_the_request_audience_is_the_login_urls_origin_normalised() -> None:
    claims = build_login_request_claims(
        issuer=ISSUER, login_url="HTTPS://Login.Shop.Example:443/signin", return_to=CALLBACK, agent_name="A",
        scopes=("poppy:read",), jti=REQUEST_JTI, now=NOW,
    )
    assert claims["aud"] == ORIGIN


def test_a_non_default_port_stays_in_the_origin() -> None:
    assert login_origin("http://127.0.0.1:8001/login") == "http://127.0.0.1:8001"


@pytest.mark.parametrize("typ", ["JWT", "at+jwt", LOGIN_RESPONSE_TYPE])
def test_a_request_of_another_type_is_refused(typ: str) -> None:
    token = sign({**REQUEST_HEADER, "typ": typ}, _request_claims(), ISSUER_KEY)
    assert _request_refused(token).reason is R.WRONG_TYPE


def test_a_request_without_typ_is_refused() -> None:
    header = {"alg": "ES256", "kid": "issuer-1"}
    assert _request_refused(sign(header, _request_claims(), ISSUER_KEY)).reason is R.WRONG_TYPE


def test_a_request_for_another_login_origin_is_refused() -> None:
    token = sign(REQUEST_HEADER, _request_claims(aud="https://evil.example"), ISSUER_KEY)
    assert _request_refused(token).reason is R.WRONG_AUDIENCE


def test_a_request_from_another_issuer_is_refused() -> None:
    token = sign(REQUEST_HEADER, _request_claims(iss="https://auth.frontdoor.example/shop-b"), ISSUER_KEY)
    assert _request_refused(token).reason is R.WRONG_ISSUER


def test_a_request_returning_anywhere_but_the_callback_is_refused() -> None:
    token = sign(REQUEST_HEADER, _request_claims(return_to="https://evil.example/login/callback"), ISSUER_KEY)
    assert _request_refused(token).reason is R.WRONG_RETURN_TO


def test_a_request_signed_by_another_key_is_forged() -> None:
    token = sign(REQUEST_HEADER, _request_claims(), ec_key("issuer-1"))
    assert _request_refused(token).reason is R.BAD_SIGNATURE


def test_an_expired_request_is_refused() -> None:
    token = sign_login_request(_request_claims(), ISSUER_KEY, "issuer-1")
    assert _request_refused(token, now=NOW + 120 + 30).reason is R.EXPIRED


def test_a_request_with_a_malformed_scope_is_refused() -> None:
    token = sign(REQUEST_HEADER, _request_claims(scope="poppy:read  double"), ISSUER_KEY)
    error = _request_refused(token)
    assert (error.reason, error.claim) == (R.INVALID_CLAIM, "scope")


def test_a_request_without_agent_name_is_refused() -> None:
    token = sign(REQUEST_HEADER, _request_claims(agent_name=None), ISSUER_KEY)
    error = _request_refused(token)
    assert (error.reason, error.claim) == (R.MISSING_CLAIM, "agent_name")


def test_building_a_request_for_another_return_to_is_a_bug() -> None:
    with pytest.raises(ValueError, match="return_to"):
        build_login_request_claims(
            issuer=ISSUER, login_url=LOGIN_URL, return_to="https://evil.example/cb", agent_name="A",
            scopes=("poppy:read",), jti=REQUEST_JTI, now=NOW,
        )


def test_building_a_request_longer_than_120_seconds_is_a_bug() -> None:
    with pytest.raises(ValueError):
        build_login_request_claims(
            issuer=ISSUER, login_url=LOGIN_URL, return_to=CALLBACK, agent_name="A", scopes=("poppy:read",),
            jti=REQUEST_JTI, now=NOW, lifetime=121,
        )


def test_building_a_request_without_scopes_is_a_bug() -> None:
    with pytest.raises(ValueError):
        build_login_request_claims(
            issuer=ISSUER, login_url=LOGIN_URL, return_to=CALLBACK, agent_name="A", scopes=(), jti=REQUEST_JTI,
            now=NOW,
        )


def test_the_callback_url_is_under_the_issuer() -> None:
    assert login_callback_url(ISSUER) == CALLBACK


# The response ---------------------------------------------------------------------------


def test_a_signed_response_gives_the_account() -> None:
    claims = _response_claims()
    result = _verify_response(sign_login_response(claims, COMPANY_KEY, "company-1"))
    assert result == LoginResponse(account_id=ACCOUNT, jti=claims["jti"], exp=NOW + 60)


def test_the_response_carries_exactly_the_claims_of_the_contract() -> None:
    assert set(_response_claims()) == {"iss", "aud", "sub", "request_jti", "iat", "exp", "jti"}


@pytest.mark.parametrize("typ", [None, "JWT", "application/login-response+jwt"])
def test_a_response_typed_jwt_or_untyped_is_accepted(typ: str | None) -> None:
    header = {"alg": "ES256", "kid": "company-1", **({"typ": typ} if typ else {})}
    assert _verify_response(sign(header, _response_claims(), COMPANY_KEY)).account_id == ACCOUNT


@pytest.mark.parametrize("typ", ["at+jwt", "dpop+jwt", LOGIN_REQUEST_TYPE])
def test_another_kind_of_jwt_is_not_a_response(typ: str) -> None:
    token = sign({**RESPONSE_HEADER, "typ": typ}, _response_claims(), COMPANY_KEY)
    assert _response_refused(token).reason is R.WRONG_TYPE


def test_alg_none_is_refused() -> None:
    assert _response_refused(unsigned(RESPONSE_HEADER, _response_claims())).reason is R.ALGORITHM_NOT_ACCEPTED


def test_hs256_keyed_with_the_public_key_is_refused() -> None:
    token = hs256_with_public_key(RESPONSE_HEADER, _response_claims(), public(COMPANY_KEY))
    assert _response_refused(token).reason is R.ALGORITHM_NOT_ACCEPTED


def test_rs256_is_refused_even_with_a_trusted_rsa_key() -> None:
    rsa = rsa_key("company-rsa")
    token = sign({"alg": "RS256", "kid": "company-rsa"}, _response_claims(), rsa)
    assert _response_refused(token, keys=public_set(COMPANY_KEY, rsa)).reason is R.ALGORITHM_NOT_ACCEPTED


@pytest.mark.parametrize("member", ["jwk", "jku", "x5c", "x5u"])
def test_a_key_carried_in_the_header_is_refused(member: str) -> None:
    header = {**RESPONSE_HEADER, member: public(COMPANY_KEY).as_dict() if member == "jwk" else "https://evil.example/k"}
    assert _response_refused(sign(header, _response_claims(), COMPANY_KEY)).reason is R.EMBEDDED_KEY


def test_an_unknown_kid_asks_for_a_refetch() -> None:
    other = ec_key("company-2")
    token = sign({**RESPONSE_HEADER, "kid": "company-2"}, _response_claims(), other)
    assert _response_refused(token).reason is R.UNKNOWN_KEY


def test_a_forged_signature_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(), ec_key("company-1"))
    assert _response_refused(token).reason is R.BAD_SIGNATURE


def test_without_kid_every_published_key_is_tried() -> None:
    new = ec_key("company-2")
    token = sign({"alg": "ES256"}, _response_claims(), new)
    assert _verify_response(token, keys=public_set(COMPANY_KEY, new)).account_id == ACCOUNT


def test_a_response_for_another_audience_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(aud="https://auth.frontdoor.example/shop-b"), COMPANY_KEY)
    assert _response_refused(token).reason is R.WRONG_AUDIENCE


def test_an_audience_array_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(aud=[ISSUER]), COMPANY_KEY)
    assert _response_refused(token).reason is R.WRONG_AUDIENCE


def test_a_response_from_another_origin_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(iss="https://evil.example"), COMPANY_KEY)
    assert _response_refused(token).reason is R.WRONG_ISSUER


def test_a_response_to_another_request_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(request_jti="req_" + "b" * 40), COMPANY_KEY)
    assert _response_refused(token).reason is R.WRONG_REQUEST


def test_an_expired_response_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(), COMPANY_KEY)
    assert _response_refused(token, now=NOW + 60 + 30).reason is R.EXPIRED


def test_the_skew_tolerates_a_slightly_late_response() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(), COMPANY_KEY)
    assert _verify_response(token, now=NOW + 60 + 29).account_id == ACCOUNT


def test_a_response_issued_in_the_future_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(iat=NOW + 31, exp=NOW + 91), COMPANY_KEY)
    assert _response_refused(token).reason is R.NOT_YET_VALID


def test_a_response_not_valid_yet_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(nbf=NOW + 31), COMPANY_KEY)
    assert _response_refused(token).reason is R.NOT_YET_VALID


def test_a_response_living_longer_than_120_seconds_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(exp=NOW + 121), COMPANY_KEY)
    assert _response_refused(token).reason is R.LIFETIME_TOO_LONG


def test_a_response_expiring_before_it_is_issued_is_refused() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(exp=NOW), COMPANY_KEY)
    assert _response_refused(token).reason is R.LIFETIME_TOO_LONG


@pytest.mark.parametrize("claim", ["iss", "aud", "sub", "request_jti", "iat", "exp", "jti"])
def test_a_response_missing_a_claim_is_refused(claim: str) -> None:
    error = _response_refused(sign(RESPONSE_HEADER, _response_claims(**{claim: None}), COMPANY_KEY))
    assert (error.reason, error.claim) == (R.MISSING_CLAIM, claim)


@pytest.mark.parametrize("exp", ["1780000060", True, -5])
def test_a_non_numeric_exp_is_refused(exp: object) -> None:
    error = _response_refused(sign(RESPONSE_HEADER, _response_claims(exp=exp), COMPANY_KEY))
    assert (error.reason, error.claim) == (R.INVALID_CLAIM, "exp")


def test_a_short_jti_is_refused() -> None:
    error = _response_refused(sign(RESPONSE_HEADER, _response_claims(jti="short"), COMPANY_KEY))
    assert (error.reason, error.claim) == (R.INVALID_CLAIM, "jti")


@pytest.mark.parametrize("sub", ["two words", "x" * 257, ""])
def test_an_account_id_that_is_not_plain_is_refused(sub: str) -> None:
    error = _response_refused(sign(RESPONSE_HEADER, _response_claims(sub=sub), COMPANY_KEY))
    assert (error.reason, error.claim) == (R.INVALID_CLAIM, "sub")


def test_a_value_that_is_not_a_jws_is_malformed() -> None:
    assert _response_refused("not.a.jwt").reason is R.MALFORMED


def test_the_error_names_no_value_from_the_token() -> None:
    token = sign(RESPONSE_HEADER, _response_claims(iss="https://evil.example/secret-looking"), COMPANY_KEY)
    assert "evil" not in str(_response_refused(token))


def test_a_maximum_lifetime_above_120_seconds_is_a_bug() -> None:
    with pytest.raises(ValueError):
        _verify_response(sign(RESPONSE_HEADER, _response_claims(), COMPANY_KEY), max_lifetime=300)


def test_building_a_response_with_a_url_instead_of_an_origin_is_a_bug() -> None:
    with pytest.raises(ValueError, match="origin"):
        build_login_response_claims(
            account_id=ACCOUNT, request_jti=REQUEST_JTI, login_origin=LOGIN_URL, issuer=ISSUER, jti=jti(), now=NOW
        )


def test_signing_with_a_public_key_is_a_bug() -> None:
    with pytest.raises(ValueError):
        sign_login_response(_response_claims(), public(COMPANY_KEY), "company-1")  # type: ignore[arg-type]


# The company's keys ---------------------------------------------------------------------


def test_an_uploaded_public_key_is_accepted() -> None:
    assert login_public_key(public(COMPANY_KEY).as_dict()).kid == "company-1"


def test_an_uploaded_private_key_is_refused() -> None:
    with pytest.raises(ValueError, match="private"):
        login_public_key(COMPANY_KEY.as_dict(private=True))


def test_an_uploaded_key_of_another_curve_is_refused() -> None:
    with pytest.raises(ValueError, match="P-256"):
        login_public_key(public(ec_key("k", crv="P-384")).as_dict())


def test_an_uploaded_key_needs_a_kid() -> None:
    with pytest.raises(ValueError, match="kid"):
        login_public_key({k: v for k, v in public(COMPANY_KEY).as_dict().items() if k != "kid"})


def test_an_uploaded_point_off_the_curve_is_refused() -> None:
    jwk = public(COMPANY_KEY).as_dict()
    with pytest.raises(ValueError, match="valid"):
        login_public_key({**jwk, "y": jwk["x"]})


def test_an_uploaded_encryption_key_is_refused() -> None:
    with pytest.raises(ValueError, match="ES256"):
        login_public_key({**public(COMPANY_KEY).as_dict(), "use": "enc"})


def test_a_jwks_publishing_a_private_key_is_refused_whole() -> None:
    with pytest.raises(ValueError, match="private"):
        login_key_set({"keys": [public(ec_key("a")).as_dict(), COMPANY_KEY.as_dict(private=True)]})


def test_a_jwks_keeps_only_es256_keys() -> None:
    keys = login_key_set({"keys": [public(rsa_key()).as_dict(), public(COMPANY_KEY).as_dict()]})
    assert [key.kid for key in keys.keys] == ["company-1"]


def test_a_jwks_without_an_es256_key_is_refused() -> None:
    with pytest.raises(ValueError, match="usable"):
        login_key_set({"keys": [public(rsa_key()).as_dict()]})


# The worked example of docs/login-handoff.md --------------------------------------------

DOC = (Path(__file__).parents[3] / "docs" / "login-handoff.md").read_text(encoding="utf-8")


def _doc_blocks(prefix: str) -> list[str]:
    return [line for line in DOC.splitlines() if line.startswith(prefix)]


def test_the_documented_request_verifies() -> None:
    issuer_jwks, _ = (json.loads(line) for line in _doc_blocks('{"keys"'))
    token, _ = _doc_blocks("eyJ")
    request = verify_login_request(
        token, keys=login_key_set(issuer_jwks), issuer="https://id.frontdoor.example/acme",
        login_origin="https://shop.example", now=1796036430,
    )
    assert (request.agent_name, request.scopes) == ("Poppy Assistant", ("poppy:read", "orders:read"))


def test_the_documented_response_verifies() -> None:
    _, company_jwks = (json.loads(line) for line in _doc_blocks('{"keys"'))
    _, token = _doc_blocks("eyJ")
    response = verify_login_response(
        token, keys=login_key_set(company_jwks), expected_issuer="https://shop.example",
        audience="https://id.frontdoor.example/acme", expected_request_jti="Wk3qV9yZr2m0pX1bQ7sT4uH8nL5cE6dA0fG2hJ9kM3o",
        now=1796036430,
    )
    assert response.account_id == "cust_81724"
