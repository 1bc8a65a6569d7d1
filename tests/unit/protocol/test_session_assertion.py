"""Session assertions: the jwt-bearer grant that starts a Session (PAP §4.2).

Every refusal is ``invalid_grant``. Replay (PAP-4.2-09) is the caller's: the result gives
it the ``jti`` and ``exp`` to store.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol import (
    ErrorCode,
    ProtocolError,
    SessionAssertion,
    UnknownKeyId,
    is_user_id,
    verify_session_assertion,
)
from joserfc.jwk import KeySet

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
USER = "usr_conf_3q2-7wXyZ_abcdEFGH12"


def _claims(**changes: Any) -> dict[str, Any]:
    claims = assertion_claims(sub=USER)
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def _verify(assertion: str, keys: KeySet = KEYS, **options: Any) -> SessionAssertion:
    return verify_session_assertion(assertion, client_id=CLIENT_ID, issuer=ISSUER, keys=keys, now=NOW, **options)


def _refused(assertion: str, keys: KeySet = KEYS, **options: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        _verify(assertion, keys, **options)
    error = raised.value
    assert error.code is ErrorCode.INVALID_GRANT
    assert error.status == 400
    assert error.description is not None
    assert USER not in error.description and ISSUER not in error.description
    return error


def test_pap_4_2_07_a_valid_session_assertion_gives_the_user_id_and_replay_key() -> None:
    """PAP-4.2-07/08: iss = client_id, sub = the User ID, aud = the issuer; jti and exp returned."""
    claims = _claims()
    result = _verify(sign(HEADER, claims, AGENT_KEY))
    assert result == SessionAssertion(
        user_id=USER, jti=claims["jti"], exp=claims["exp"], iat=claims["iat"], kid="key-1"
    )


@pytest.mark.parametrize("aud", [TOKEN_ENDPOINT, "https://other-company.example/oauth/token", ISSUER + "/"])
def test_pap_4_2_07_any_other_aud_is_refused(aud: str) -> None:
    """PAP-4.2-07: aud is auth.issuer, compared character for character; the token endpoint too."""
    error = _refused(sign(HEADER, _claims(aud=aud), AGENT_KEY))
    assert error.description == "session assertion aud is not this issuer"


@pytest.mark.parametrize("aud", [[ISSUER], [ISSUER, "https://other-company.example"]])
def test_pap_4_2_07_aud_is_a_single_string_not_an_array(aud: list[str]) -> None:
    """PAP-4.2-07: "as a single string rather than an array"."""
    _refused(sign(HEADER, _claims(aud=aud), AGENT_KEY))


def test_pap_4_2_08_exp_at_most_five_minutes_after_iat() -> None:
    """PAP-4.2-08: 300 s is accepted (peer case five-minutes), 301 s and an hour are not (long-lived)."""
    assert _verify(sign(HEADER, assertion_claims(sub=USER, lifetime=300), AGENT_KEY))
    for lifetime in (301, 3600):
        _refused(sign(HEADER, assertion_claims(sub=USER, lifetime=lifetime), AGENT_KEY))


def test_pap_4_2_08_the_bound_cannot_be_widened() -> None:
    """PAP-4.2-08: a caller cannot accept Session assertions living longer than 300 s."""
    with pytest.raises(ValueError):
        _verify(sign(HEADER, _claims(), AGENT_KEY), max_lifetime=301)


def test_guide_jwt_04_clock_skew_is_tolerated_but_not_more() -> None:
    """GUIDE-jwt-04: 10 s ahead accepted; 300 s ahead and 600 s old refused."""
    assert _verify(sign(HEADER, assertion_claims(sub=USER, shift=10), AGENT_KEY))
    _refused(sign(HEADER, assertion_claims(sub=USER, shift=300), AGENT_KEY))
    _refused(sign(HEADER, assertion_claims(sub=USER, shift=-600), AGENT_KEY))


def test_guide_jwt_03_iss_must_be_the_authenticated_client() -> None:
    """GUIDE-jwt-03 (peer case wrong-issuer): a Session assertion names the client that sent it."""
    error = _refused(sign(HEADER, _claims(iss="https://stranger.example/agent.json"), AGENT_KEY))
    assert error.description == "session assertion iss is not the client"


@pytest.mark.parametrize("user_id", [USER, "a", "0f8b6c1e-5a4b-4c4e-9d2b-1e2f3a4b5c6d", "x" * 256, "urn:x:y"])
def test_pap_4_2_01_user_ids_of_the_agents_choosing_are_accepted(user_id: str) -> None:
    """PAP-4.2-01: the agent chooses the User ID; any plain token-like string is fine."""
    assert is_user_id(user_id)
    assert _verify(sign(HEADER, _claims(sub=user_id), AGENT_KEY)).user_id == user_id


@pytest.mark.parametrize("user_id", ["", " ", "two words", "tab\there", "caf\u00e9", "x" * 257, 42, None, ["usr"]])
def test_pap_4_2_01_odd_user_ids_are_refused(user_id: object) -> None:
    """A sub that is empty, spaced, non-ASCII, too long or not a string is refused."""
    assert not is_user_id(user_id)
    _refused(sign(HEADER, _claims(sub=user_id), AGENT_KEY))


@pytest.mark.parametrize("value", [None, "", "0123456789abcde"])
def test_pap_4_2_09_jti_is_required(value: str | None) -> None:
    """PAP-4.2-09: replay is refused by jti, so it must be present (and not guessably short)."""
    _refused(sign(HEADER, _claims(jti=value), AGENT_KEY))


def test_pap_5_05_a_browser_assertion_is_not_a_session_assertion() -> None:
    """PAP-5-05 (peer case browser-assertion-at-token-endpoint): typ poppy-browser+jwt is refused."""
    error = _refused(sign({**HEADER, "typ": "poppy-browser+jwt"}, _claims(), AGENT_KEY))
    assert error.description == "session assertion typ is not accepted"
    _refused(sign({**HEADER, "typ": "client-authentication+jwt"}, _claims(), AGENT_KEY))


def test_guide_jwt_02_03_alg_and_key_rules_are_shared() -> None:
    """GUIDE-jwt-02/03: none, HS256 with the public key, RS256 on an EC key, embedded jwk: refused."""
    _refused(unsigned(HEADER, _claims()))
    _refused(hs256_with_public_key(HEADER, _claims(), public(AGENT_KEY)))
    _refused(sign({**HEADER, "alg": "RS256"}, _claims(), rsa_key("key-1")))
    stranger = ec_key("key-1")
    _refused(sign({**HEADER, "jwk": public(stranger).as_dict()}, _claims(), stranger))


def test_guide_keys_02_unknown_kid_is_invalid_grant_and_signalled() -> None:
    """GUIDE-keys-02: an unknown kid raises UnknownKeyId carrying invalid_grant."""
    error = _refused(sign({**HEADER, "kid": "key-9"}, _claims(), ec_key("key-9")))
    assert isinstance(error, UnknownKeyId)
    assert error.code is ErrorCode.INVALID_GRANT


def _peer_cases() -> list[dict[str, Any]]:
    document = load_fixture("conformance/security.json")
    cases = [case for case in document["cases"] if case.get("target") == "session_assertion"]
    assert len(cases) >= 9
    # Replay is checked by the caller's store, not by this pure function.
    return [case for case in cases if not case["mutation"].get("replay")]


@pytest.mark.parametrize("case", _peer_cases(), ids=lambda case: case["id"])
def test_peer_security_session_assertion_cases(case: dict[str, Any]) -> None:
    """The peer suite's Session-assertion mutations give the status and error it expects."""
    mutation = case["mutation"]
    aud = TOKEN_ENDPOINT if mutation.get("aud") == "token_endpoint" else mutation.get("aud", ISSUER)
    claims = assertion_claims(
        sub=USER, aud=aud, lifetime=int(mutation.get("lifetime", 60)), shift=int(mutation.get("iat_offset", 0))
    )
    if "iss" in mutation:
        claims["iss"] = mutation["iss"]
    header = {**HEADER, "typ": mutation["typ"]} if "typ" in mutation else HEADER
    assertion = sign(header, claims, AGENT_KEY)
    if case["expect"]["status"] == 200:
        assert _verify(assertion).user_id == USER
    else:
        error = _refused(assertion)
        assert (error.status, error.code.value) == (case["expect"]["status"], case["expect"]["error"])
