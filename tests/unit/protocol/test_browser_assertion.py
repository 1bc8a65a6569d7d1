"""The browser assertion of PAP §5, as the company verifies it: one rule per test.

Assertions are signed by hand with ``jose_helpers`` exactly as an agent (or an attacker)
would; the clock is the helpers' fixed ``NOW``.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol.browser_assertion import (
    BROWSER_ASSERTION_TYPE,
    BrowserAssertion,
    BrowserAssertionError,
    BrowserAssertionReason,
    browser_assertion_issuer,
    is_company_url,
    verify_browser_assertion,
)
from joserfc.jwk import KeySet

from .jose_helpers import (
    CLIENT_ID,
    NOW,
    ec_key,
    hs256_with_public_key,
    jti,
    public,
    public_set,
    rsa_key,
    sign,
    unsigned,
)

ENDPOINT = "https://shop.example/poppy/browser"
DOMAINS = ("shop.example",)
SESSION_ID = "ses_01HZX3ABCDEF"
USER = "usr_pairwise_1"
KEY = ec_key("agent-1")
KEYS = public_set(KEY)
HEADER = {"alg": "ES256", "typ": BROWSER_ASSERTION_TYPE, "kid": "agent-1"}
R = BrowserAssertionReason


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": CLIENT_ID, "sub": USER, "aud": ENDPOINT, "session_id": SESSION_ID,
        "return_to": "https://shop.example/orders/1", "iat": NOW, "exp": NOW + 60, "jti": jti(),
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _verify(token: str, keys: KeySet = KEYS, **options: Any) -> BrowserAssertion:
    arguments: dict[str, Any] = {
        "keys": keys, "client_id": CLIENT_ID, "endpoint": ENDPOINT, "company_domains": DOMAINS, "now": NOW,
    }
    arguments.update(options)
    return verify_browser_assertion(token, **arguments)


def _refused(token: str, keys: KeySet = KEYS, **options: Any) -> BrowserAssertionError:
    with pytest.raises(BrowserAssertionError) as raised:
        _verify(token, keys, **options)
    return raised.value


def test_a_signed_assertion_verifies() -> None:
    claims = _claims()
    verified = _verify(sign(HEADER, claims, KEY))
    assert verified == BrowserAssertion(
        client_id=CLIENT_ID, user_id=USER, session_id=SESSION_ID, return_to="https://shop.example/orders/1",
        jti=claims["jti"], iat=NOW, exp=NOW + 60,
    )


def test_the_typ_compares_as_a_media_type() -> None:
    token = sign({**HEADER, "typ": "application/POPPY-browser+JWT"}, _claims(), KEY)
    assert _verify(token).user_id == USER


@pytest.mark.parametrize("typ", ["JWT", "jwt", "dpop+jwt", "at+jwt", None])
def test_a_session_assertion_or_any_other_type_is_refused(typ: str | None) -> None:
    header = {name: value for name, value in {**HEADER, "typ": typ}.items() if value is not None}
    assert _refused(sign(header, _claims(), KEY)).reason is R.WRONG_TYPE


def test_the_issuers_unverified_iss_names_whose_keys_to_fetch() -> None:
    assert browser_assertion_issuer(sign(HEADER, _claims(), KEY)) == CLIENT_ID
    assert browser_assertion_issuer("not a jwt") is None
    assert browser_assertion_issuer(sign(HEADER, _claims(iss=None), KEY)) is None


def test_another_clients_assertion_is_refused() -> None:
    token = sign(HEADER, _claims(iss="https://other.example/client.json"), KEY)
    assert _refused(token).reason is R.WRONG_ISSUER


def test_a_signature_by_another_key_is_refused() -> None:
    assert _refused(sign(HEADER, _claims(), ec_key("agent-1"))).reason is R.BAD_SIGNATURE


def test_an_unknown_kid_asks_for_a_refetch() -> None:
    assert _refused(sign({**HEADER, "kid": "rotated"}, _claims(), ec_key("rotated"))).reason is R.UNKNOWN_KEY


def test_without_a_kid_the_only_fitting_key_is_used() -> None:
    header = {"alg": "ES256", "typ": BROWSER_ASSERTION_TYPE}
    assert _verify(sign(header, _claims(), KEY)).session_id == SESSION_ID


def test_rs256_verifies_with_an_rsa_key_of_the_client() -> None:
    key = rsa_key("rsa-1")
    token = sign({"alg": "RS256", "typ": BROWSER_ASSERTION_TYPE, "kid": "rsa-1"}, _claims(), key)
    assert _verify(token, KeySet([public(key), public(KEY)])).user_id == USER


@pytest.mark.parametrize("forge", ["none", "hs256"])
def test_unsigned_and_hmac_forgeries_are_refused(forge: str) -> None:
    token = unsigned(HEADER, _claims()) if forge == "none" else hs256_with_public_key(HEADER, _claims(), KEY)
    assert _refused(token).reason is R.ALGORITHM_NOT_ACCEPTED


@pytest.mark.parametrize("member", ["jwk", "jku", "x5c", "x5u"])
def test_a_key_carried_in_the_header_is_refused(member: str) -> None:
    header = {**HEADER, member: public(KEY).as_dict() if member == "jwk" else "https://evil.example/k"}
    assert _refused(sign(header, _claims(), KEY)).reason is R.EMBEDDED_KEY


@pytest.mark.parametrize("aud", ["https://shop.example/elsewhere", [ENDPOINT], "https://shop.example/poppy/browser/"])
def test_another_audience_is_refused(aud: Any) -> None:
    assert _refused(sign(HEADER, _claims(aud=aud), KEY)).reason is R.WRONG_AUDIENCE


@pytest.mark.parametrize("lifetime", [61, 600, 0, -5])
def test_a_lifetime_above_60_seconds_or_not_positive_is_refused(lifetime: int) -> None:
    token = sign(HEADER, _claims(exp=NOW + lifetime), KEY)
    assert _refused(token).reason is R.LIFETIME_TOO_LONG


def test_an_expired_assertion_is_refused_past_the_skew() -> None:
    token = sign(HEADER, _claims(iat=NOW - 100, exp=NOW - 40), KEY)
    assert _verify(token, skew=60).user_id == USER
    assert _refused(token).reason is R.EXPIRED
    assert _refused(sign(HEADER, _claims(iat=NOW - 60, exp=NOW), KEY), skew=0).reason is R.EXPIRED


def test_an_assertion_from_the_future_is_refused() -> None:
    token = sign(HEADER, _claims(iat=NOW + 31, exp=NOW + 60), KEY)
    assert _refused(token).reason is R.NOT_YET_VALID
    assert _refused(sign(HEADER, _claims(nbf=NOW + 45), KEY)).reason is R.NOT_YET_VALID


@pytest.mark.parametrize("claim", ["iss", "aud", "sub", "session_id", "return_to", "iat", "exp", "jti"])
def test_every_claim_is_required(claim: str) -> None:
    claims = _claims()
    del claims[claim]
    error = _refused(sign(HEADER, claims, KEY))
    assert error.reason is R.MISSING_CLAIM and error.claim == claim


@pytest.mark.parametrize(("claim", "value"), [
    ("sub", "has space"), ("sub", 42), ("session_id", "x" * 257), ("session_id", "a\nb"), ("jti", "short"),
    ("iat", "1780000000"), ("exp", True),
])
def test_malformed_claims_are_refused(claim: str, value: Any) -> None:
    error = _refused(sign(HEADER, _claims(**{claim: value}), KEY))
    assert error.reason is R.INVALID_CLAIM and error.claim == claim


@pytest.mark.parametrize("return_to", [
    "https://evil.example/",
    "https://evilshop.example/",
    "https://shop.example.evil.example/",
    "http://shop.example/",
    "https://user@shop.example/",
    "//shop.example/x",
    "/orders/1",
    "https://shop.example/\r\nSet-Cookie: x=1",
    "https://shop.example/caf\u00e9",
    "javascript:alert(1)",
])
def test_a_return_to_off_the_companys_domains_is_refused(return_to: str) -> None:
    assert _refused(sign(HEADER, _claims(return_to=return_to), KEY)).reason is R.FOREIGN_RETURN_TO


@pytest.mark.parametrize("return_to", [
    "https://shop.example/", "https://www.shop.example/orders?id=1", "https://SHOP.example:8443/x",
    "https://shop.example/#top",
])
def test_a_return_to_on_the_domain_or_a_subdomain_is_accepted(return_to: str) -> None:
    assert _verify(sign(HEADER, _claims(return_to=return_to), KEY)).return_to == return_to


def test_another_of_the_companys_domains_is_accepted() -> None:
    token = sign(HEADER, _claims(return_to="https://shop-two.example/"), KEY)
    assert _verify(token, company_domains=("shop.example", "shop-two.example")).return_to == "https://shop-two.example/"
    assert not is_company_url("https://shop-two.example/", ())


def test_refusals_never_name_a_value() -> None:
    secret = "usr_" + "s" * 30
    error = _refused(sign(HEADER, _claims(sub=secret, aud="https://x.example/"), KEY))
    assert secret not in str(error) and "x.example" not in str(error)


@pytest.mark.parametrize("options", [{"client_id": ""}, {"endpoint": ""}, {"skew": -1}, {"skew": 61},
                                     {"algorithms": ("HS256",)}])
def test_bad_parameters_are_programming_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as raised:
        _verify(sign(HEADER, _claims(), KEY), **options)
    assert not isinstance(raised.value, BrowserAssertionError)
