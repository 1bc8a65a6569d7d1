"""The one JWT profile verifier (frontdoor_protocol.jwt_profile): order, kinds, options.

Tokens are signed by hand with ``jose_helpers``; the clock is the helpers' ``NOW``. The
message types' own tests (browser assertion, login handoff, relay...) pin their reasons;
these pin what the mechanism itself promises.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest
from frontdoor_protocol import (
    AudienceRule,
    ClaimRule,
    JWTProfile,
    JWTRefusal,
    JWTRefusalKind,
    KeySource,
    access_token_binding,
    key_binding,
    reason_table,
    request_binding,
    verify_profiled_jwt,
)
from frontdoor_protocol.jwt_binding import access_token_hash
from joserfc.jwk import KeySet

from .jose_helpers import NOW, ec_key, jti, public_set, rsa_key, sign, unsigned

K = JWTRefusalKind
ISS = "https://signer.example"
AUD = "https://verifier.example"
KEY = ec_key("k1")
KEYS = public_set(KEY)
HEADER = {"alg": "ES256", "typ": "test+jwt", "kid": "k1"}
PROFILE = JWTProfile(
    types=frozenset({"test+jwt"}),
    algorithms=frozenset({"ES256"}),
    max_lifetime=60,
    required=(ClaimRule("sub"), ClaimRule("n", lambda value: isinstance(value, int))),
    forbidden=("cnf",),
)


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {"iss": ISS, "aud": AUD, "iat": NOW, "exp": NOW + 60, "jti": jti(), "sub": "s", "n": 1}
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _refusal(token: str, profile: JWTProfile = PROFILE, keys: KeySet = KEYS, skew: int = 0) -> JWTRefusal:
    with pytest.raises(JWTRefusal) as raised:
        verify_profiled_jwt(token, profile, keys=keys, issuer=ISS, audience=AUD, now=NOW, skew=skew)
    return raised.value


def test_a_token_that_fits_its_profile_verifies() -> None:
    claims = _claims(exp=NOW + 59.5)
    verified = verify_profiled_jwt(sign(HEADER, claims, KEY), PROFILE, keys=KEYS, issuer=ISS, audience=AUD, now=NOW,
                                   skew=0)
    assert (verified.jti, verified.iat, verified.exp, verified.kid, verified.alg) == (
        claims["jti"], NOW, NOW + 60, "k1", "ES256")  # exp rounded up for the replay window
    assert verified.claims["n"] == 1


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        ({"alg": "ES256", "kid": "k1"}, K.WRONG_TYPE),
        ({**HEADER, "typ": "other+jwt"}, K.WRONG_TYPE),
        ({**HEADER, "alg": "ES384"}, K.ALGORITHM_NOT_ACCEPTED),
        ({**HEADER, "jku": "https://evil.example/jwks"}, K.EMBEDDED_KEY),
        ({**HEADER, "kid": 7}, K.MALFORMED_KID),
        ({**HEADER, "kid": "k2"}, K.UNKNOWN_KEY),
    ],
)
def test_header_refusals(header: dict[str, Any], kind: JWTRefusalKind) -> None:
    assert _refusal(sign(header, _claims(), KEY, alg="ES256")).kind is kind


def test_the_first_failed_check_is_reported_whatever_the_claims_order() -> None:
    # Wrong issuer, wrong audience and expired at once: iss is checked first, in either order.
    bad = {"exp": NOW - 100, "iat": NOW - 120, "aud": "https://else.example", "iss": "https://else.example"}
    assert _refusal(sign(HEADER, _claims(**bad), KEY)).kind is K.WRONG_ISSUER
    reordered = dict(reversed(list(_claims(**bad).items())))
    assert _refusal(sign(HEADER, reordered, KEY)).kind is K.WRONG_ISSUER


@pytest.mark.parametrize(
    ("changes", "kind", "claim"),
    [
        ({"iss": None}, K.MISSING_CLAIM, "iss"),
        ({"iss": 5}, K.INVALID_CLAIM, "iss"),
        ({"aud": None}, K.MISSING_CLAIM, "aud"),
        ({"aud": [AUD]}, K.AUDIENCE_NOT_ONE_STRING, None),
        ({"aud": "https://else.example"}, K.WRONG_AUDIENCE, None),
        ({"exp": "soon"}, K.INVALID_CLAIM, "exp"),
        ({"iat": None}, K.MISSING_CLAIM, "iat"),
        ({"exp": NOW + 61}, K.LIFETIME_TOO_LONG, None),
        ({"exp": NOW}, K.LIFETIME_TOO_LONG, None),
        ({"iat": NOW - 60, "exp": NOW}, K.EXPIRED, None),
        ({"iat": NOW + 5, "exp": NOW + 30}, K.ISSUED_IN_FUTURE, None),
        ({"nbf": NOW + 5}, K.NOT_YET_VALID, None),
        ({"nbf": True}, K.INVALID_CLAIM, "nbf"),
        ({"jti": "short"}, K.INVALID_CLAIM, "jti"),
        ({"sub": None}, K.MISSING_CLAIM, "sub"),
        ({"sub": None, "n": None}, K.MISSING_CLAIM, "sub"),  # declared order: sub before n
        ({"n": "1"}, K.INVALID_CLAIM, "n"),
        ({"cnf": {}}, K.FORBIDDEN_CLAIM, "cnf"),
    ],
)
def test_claim_refusals(changes: dict[str, Any], kind: JWTRefusalKind, claim: str | None) -> None:
    refused = _refusal(sign(HEADER, _claims(**changes), KEY))
    assert (refused.kind, refused.claim) == (kind, claim)


def test_skew_widens_the_time_window() -> None:
    token = sign(HEADER, _claims(iat=NOW + 5, exp=NOW + 30), KEY)
    verify_profiled_jwt(token, PROFILE, keys=KEYS, issuer=ISS, audience=AUD, now=NOW, skew=5)
    assert _refusal(token, skew=4).kind is K.ISSUED_IN_FUTURE


def test_signature_refusals() -> None:
    other = ec_key("k1")
    assert _refusal(sign(HEADER, _claims(), other)).kind is K.BAD_SIGNATURE
    assert _refusal(unsigned({**HEADER, "alg": "none"}, _claims())).kind is K.ALGORITHM_NOT_ACCEPTED
    two = public_set(ec_key("a"), ec_key("b"))
    kidless = {"alg": "ES256", "typ": "test+jwt"}
    assert _refusal(sign(kidless, _claims(), KEY), keys=two).kind is K.AMBIGUOUS_KEY
    rsa_only = public_set(rsa_key("k1"))
    assert _refusal(sign(HEADER, _claims(), KEY), keys=rsa_only).kind is K.KEY_DOES_NOT_FIT


def test_without_kid_every_fitting_key_may_be_tried_when_the_profile_says_so() -> None:
    rotating = JWTProfile(types=frozenset({"test+jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=60,
                          kidless_tries_every_key=True)
    old, new = ec_key("old"), ec_key("new")
    token = sign({"alg": "ES256", "typ": "test+jwt"}, _claims(), new)
    verified = verify_profiled_jwt(token, rotating, keys=public_set(old, new), issuer=ISS, audience=AUD, now=NOW, skew=0)
    assert verified.kid == "new"
    strict = JWTProfile(types=frozenset({"test+jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=60)
    assert _refusal(token, strict, keys=public_set(old, new)).kind is K.AMBIGUOUS_KEY
    assert _refusal(token, rotating, keys=public_set(old)).kind is K.BAD_SIGNATURE


def test_an_optional_typ_may_be_absent_but_never_wrong() -> None:
    optional = JWTProfile(types=frozenset({"jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=60,
                          typ_optional=True)
    verify_profiled_jwt(sign({"alg": "ES256", "kid": "k1"}, _claims(), KEY), optional, keys=KEYS, issuer=ISS,
                        audience=AUD, now=NOW, skew=0)
    assert _refusal(sign({"alg": "ES256", "kid": "k1", "typ": 1}, _claims(), KEY), optional).kind is K.WRONG_TYPE
    assert _refusal(sign(HEADER, _claims(), KEY), optional).kind is K.WRONG_TYPE  # test+jwt is not jwt
    verify_profiled_jwt(sign({**HEADER, "typ": "application/JWT"}, _claims(), KEY), optional, keys=KEYS, issuer=ISS,
                        audience=AUD, now=NOW, skew=0)


def test_a_profile_refuses_symmetric_algorithms_and_a_bad_lifetime() -> None:
    with pytest.raises(ValueError):
        JWTProfile(types=frozenset({"jwt"}), algorithms=frozenset({"HS256"}), max_lifetime=60)
    with pytest.raises(ValueError):
        JWTProfile(types=frozenset({"jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=0)
    with pytest.raises(ValueError):
        PROFILE.with_limits(algorithms=("none",))
    assert PROFILE.with_limits(algorithms=("ES256",)) is PROFILE


def test_reason_table_keeps_a_types_values_and_folds_finer_kinds() -> None:
    class Reason(StrEnum):
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

    table = reason_table(Reason)
    assert set(table) == set(JWTRefusalKind)
    assert table[K.MALFORMED_KID] is Reason.MALFORMED
    assert table[K.AMBIGUOUS_KEY] is Reason.BAD_SIGNATURE
    assert table[K.AUDIENCE_NOT_ONE_STRING] is Reason.WRONG_AUDIENCE
    assert table[K.ISSUED_IN_FUTURE] is Reason.NOT_YET_VALID
    assert table[K.EXPIRED] is Reason.EXPIRED

    class TooFew(StrEnum):
        MALFORMED = "malformed"

    with pytest.raises(ValueError, match="TooFew has no reason for wrong_type"):
        reason_table(TooFew)


# The options the other message types need (DPoP, issuer tokens, delegations, Session JWTs).

PROOF = JWTProfile(
    types=frozenset({"dpop+jwt"}),
    typ_exact=True,
    algorithms=frozenset({"ES256"}),
    key_source=KeySource.HEADER_JWK,
    issuer_required=False,
    audience=None,
    exp_required=False,
    max_lifetime=None,
    iat_window=(60, 10),
    required=(ClaimRule("htm"), ClaimRule("htu")),
)
API = "https://api.example/orders"


def _proof_claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {"jti": jti(), "htm": "GET", "htu": API, "iat": NOW}
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _proof(key: Any = KEY, header: dict[str, Any] | None = None, **changes: Any) -> str:
    head = {"alg": "ES256", "typ": "dpop+jwt", "jwk": key.as_dict(private=False), **(header or {})}
    return sign({name: value for name, value in head.items() if value is not None}, _proof_claims(**changes), key)


def _proof_refusal(token: str, *bindings: Any) -> JWTRefusal:
    with pytest.raises(JWTRefusal) as raised:
        verify_profiled_jwt(token, PROOF, keys=None, issuer=None, audience=None, now=NOW, skew=0, bindings=bindings)
    return raised.value


def test_a_header_jwk_profile_verifies_with_the_carried_key_and_returns_its_thumbprint() -> None:
    verified = verify_profiled_jwt(_proof(), PROOF, keys=None, issuer=None, audience=None, now=NOW, skew=0,
                                   bindings=(request_binding("GET", API + "?page=2"), key_binding(KEY.thumbprint())))
    assert verified.jkt == KEY.thumbprint()
    assert verified.exp == NOW + 60  # no exp: the replay horizon is the end of the iat window


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        ({"typ": "application/dpop+jwt"}, K.WRONG_TYPE),  # typ_exact: no media-type folding
        ({"typ": "DPOP+JWT"}, K.WRONG_TYPE),
        ({"jwk": None}, K.HEADER_KEY_MISSING),
        ({"jwk": {**KEY.as_dict(private=True)}}, K.HEADER_KEY_PRIVATE),
        ({"jwk": {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}}, K.HEADER_KEY_INVALID),
        ({"jwk": rsa_key().as_dict(private=False)}, K.KEY_DOES_NOT_FIT),
        ({"x5u": "https://evil.example/cert"}, K.EMBEDDED_KEY),
    ],
)
def test_header_jwk_refusals(header: dict[str, Any], kind: JWTRefusalKind) -> None:
    assert _proof_refusal(_proof(header=header)).kind is kind


def test_a_header_jwk_profile_refuses_a_signature_by_another_key() -> None:
    forged = sign({"alg": "ES256", "typ": "dpop+jwt", "jwk": KEY.as_dict(private=False)}, _proof_claims(), ec_key())
    assert _proof_refusal(forged).kind is K.BAD_SIGNATURE
    assert _proof_refusal(unsigned({"alg": "none", "typ": "dpop+jwt", "jwk": KEY.as_dict(private=False)},
                                   _proof_claims())).kind is K.ALGORITHM_NOT_ACCEPTED


@pytest.mark.parametrize(
    ("changes", "kind", "claim"),
    [
        ({"iat": NOW - 61}, K.ISSUED_TOO_LONG_AGO, None),
        ({"iat": NOW + 11}, K.ISSUED_IN_FUTURE, None),
        ({"iat": None}, K.MISSING_CLAIM, "iat"),
        ({"exp": NOW - 1}, K.EXPIRED, None),  # an optional exp, when present, still counts
        ({"htm": None}, K.MISSING_CLAIM, "htm"),
        ({"htm": "POST"}, K.CLAIM_MISMATCH, "htm"),
        ({"htu": API + "?q=1"}, K.INVALID_CLAIM, "htu"),
        ({"htu": "https://api.example/other"}, K.CLAIM_MISMATCH, "htu"),
    ],
)
def test_window_and_request_binding_refusals(changes: dict[str, Any], kind: JWTRefusalKind, claim: str | None) -> None:
    refused = _proof_refusal(_proof(**changes), request_binding("GET", API))
    assert (refused.kind, refused.claim) == (kind, claim)


def test_the_token_and_key_bindings() -> None:
    token = "an-access-token"
    assert _proof_refusal(_proof(ath=access_token_hash(token)), access_token_binding(None)).kind is K.FORBIDDEN_CLAIM
    assert _proof_refusal(_proof(), access_token_binding(token)).kind is K.MISSING_CLAIM
    assert _proof_refusal(_proof(ath=access_token_hash("other")), access_token_binding(token)).kind is K.CLAIM_MISMATCH
    verify_profiled_jwt(_proof(ath=access_token_hash(token)), PROOF, keys=None, issuer=None, audience=None, now=NOW,
                        skew=0, bindings=(access_token_binding(token),))
    assert _proof_refusal(_proof(), key_binding(ec_key().thumbprint())).kind is K.KEY_NOT_BOUND


ISSUED = JWTProfile(types=frozenset({"at+jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=3600,
                    kid_required=True, audience=AudienceRule.ANY_OF)


@pytest.mark.parametrize(
    ("aud", "kind"),
    [
        ([AUD, "https://other.example"], None),
        ("https://other.example", K.WRONG_AUDIENCE),
        (["https://other.example"], K.WRONG_AUDIENCE),
        ([], K.INVALID_CLAIM),
        ([AUD, 5], K.INVALID_CLAIM),
    ],
)
def test_an_audience_list_profile_accepts_any_accepted_audience(aud: Any, kind: JWTRefusalKind | None) -> None:
    token = sign({"alg": "ES256", "typ": "at+jwt", "kid": "k1"}, _claims(aud=aud), KEY)
    accepted = (AUD, "https://third.example")
    if kind is None:
        verify_profiled_jwt(token, ISSUED, keys=KEYS, issuer=ISS, audience=accepted, now=NOW, skew=0)
        return
    with pytest.raises(JWTRefusal) as raised:
        verify_profiled_jwt(token, ISSUED, keys=KEYS, issuer=ISS, audience=accepted, now=NOW, skew=0)
    assert raised.value.kind is kind


def test_a_kid_required_profile_refuses_a_kidless_header() -> None:
    token = sign({"alg": "ES256", "typ": "at+jwt"}, _claims(), KEY)
    with pytest.raises(JWTRefusal) as raised:
        verify_profiled_jwt(token, ISSUED, keys=KEYS, issuer=ISS, audience=AUD, now=NOW, skew=0)
    assert raised.value.kind is K.MISSING_KID


def test_one_known_key_verifies_and_another_does_not() -> None:
    token = sign(HEADER, _claims(), KEY)
    assert verify_profiled_jwt(token, PROFILE, keys=KEY, issuer=ISS, audience=AUD, now=NOW, skew=0).key is KEY
    with pytest.raises(JWTRefusal) as raised:
        verify_profiled_jwt(token, PROFILE, keys=ec_key(), issuer=ISS, audience=AUD, now=NOW, skew=0)
    assert raised.value.kind is K.BAD_SIGNATURE


def test_a_profile_needs_what_it_reads() -> None:
    with pytest.raises(ValueError):
        JWTProfile(types=frozenset({"jwt"}), algorithms=frozenset({"ES256"}), max_lifetime=None)
    with pytest.raises(ValueError):
        verify_profiled_jwt(sign(HEADER, _claims(), KEY), PROFILE, keys=KEYS, issuer=None, audience=AUD, now=NOW,
                            skew=0)
    with pytest.raises(ValueError):
        request_binding("GET", "not a url")


def test_a_crit_header_is_its_own_kind_and_folds_to_malformed() -> None:
    token = sign({**HEADER, "crit": ["exp"]}, _claims(), KEY)
    assert _refusal(token).kind is K.CRITICAL_HEADER


def test_a_client_assertion_with_crit_is_refused_with_its_code() -> None:
    from frontdoor_protocol import ErrorCode, ProtocolError
    from frontdoor_protocol.jwt_assertion import verify_jwt_assertion

    token = sign({**HEADER, "typ": "jwt", "crit": ["exp"]}, _claims(), KEY)
    with pytest.raises(ProtocolError) as raised:
        verify_jwt_assertion(token, code=ErrorCode.INVALID_CLIENT, name="client assertion", expected_iss=ISS,
                             audience=AUD, subject_ok=lambda _: True, keys=KEYS, now=NOW)
    assert raised.value.description == "client assertion is not a compact JWS"
