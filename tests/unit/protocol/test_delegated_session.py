"""PAP 1.0 ``Poppy-Session`` JWTs and their delegations: one test per rule of ADR 0004 §3.

Sources: [S §3] (the seed's "Client identity and delegated Sessions"), ADR 0004 §3, RFC 9449
(``htm``/``htu``/``ath``), RFC 7638 (the ``kid`` thumbprint). Every refusal is checked for
its exact, fixed description, so it is the rule under test that fired and nothing from
the request is echoed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from frontdoor_protocol import (
    MAX_DELEGATION_LIFETIME,
    POPPY_SESSION_HEADER,
    ErrorCode,
    ProtocolError,
    UnknownAgentKeyId,
    UnknownKeyId,
    parse_poppy_session,
    poppy_session_value,
)
from joserfc.jwk import ECKey

from .jose_helpers import CLIENT_ID, ISSUER, NOW, b64, hs256_with_public_key, jti, rsa_key, segment, sign
from .pap10_helpers import URL, Agent, ath, delegation_claims, session_claims


def refused(action: Callable[[], Any], description: str, *, leaked: str = "") -> ProtocolError:
    """Run ``action``, expect ``invalid_session`` with exactly ``description``, nothing echoed."""
    with pytest.raises(ProtocolError) as caught:
        action()
    error = caught.value
    assert error.code is ErrorCode.INVALID_SESSION
    assert error.description == description
    assert error.challenge() is None  # 400 with no challenge [S §4]
    for part in leaked.split("."):
        if len(part) >= 8:
            assert part not in str(error) and part[:8] not in str(error)
    return error


@pytest.fixture
def agent() -> Agent:
    return Agent()


def test_adr_0004_s3_a_valid_session_verifies(agent: Agent) -> None:
    """ADR 0004 §3, [S §3]: a well-formed delegated Session JWT verifies and says who and which Session."""
    value = agent.session(agent_id="agent-7", exp=NOW + 30)
    session = agent.verify(value)
    assert (session.client_id, session.sid, session.sub) == (CLIENT_ID, "sid_7GcT2mXk9Qp4LzVb0RwYhA", "usr_Hq3v9Lx0Tb7Wm2Kp")
    assert session.agent_id == "agent-7" and session.exp == NOW + 30 and session.iat == NOW
    assert session.delegated_jkt == agent.jkt and session.delegation_exp == NOW + 3600


# Step 1: the header itself.


def test_adr_0004_s3_1_no_header_is_none() -> None:
    """ADR 0004 §3 step 1: without a Poppy-Session header the request has no 1.0 Session."""
    assert poppy_session_value([("Authorization", "Bearer x")]) is None


def test_adr_0004_s3_1_two_poppy_session_headers_are_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 1: exactly one Poppy-Session header; two are refused."""
    value = agent.session()
    headers = [(POPPY_SESSION_HEADER, value), ("poppy-session", value)]
    refused(lambda: poppy_session_value(headers), "the request has more than one Poppy-Session header", leaked=value)


def test_adr_0004_s3_1_oversized_header_is_refused() -> None:
    """ADR 0004 §3 step 1: a Poppy-Session value over 8 KiB is refused."""
    value = "a" * 8193
    refused(lambda: poppy_session_value({"Poppy-Session": value}), "the Poppy-Session header is too long")
    assert poppy_session_value({"Poppy-Session": "a" * 8192}) == "a" * 8192


# Step 2: the Session JWT header.


def test_adr_0004_s3_2_session_typ_must_be_poppy_session_jwt(agent: Agent) -> None:
    """ADR 0004 §3 step 2, [S §3]: typ poppy-session+jwt; a DPoP-typed JWT is refused."""
    value = agent.session(header={"typ": "dpop+jwt"})
    refused(lambda: parse_poppy_session(value), "the Session JWT typ is not poppy-session+jwt", leaked=value)


@pytest.mark.parametrize("alg", ["none", "HS256", "RS256", "ES384"])
def test_adr_0004_s3_2_session_alg_is_es256_only(agent: Agent, alg: str) -> None:
    """ADR 0004 §3 step 2, [Q13]: the Session JWT alg is ES256 only (none, HMAC, RSA refused)."""
    if alg == "none":
        value = f"{segment({'alg': 'none', 'typ': 'poppy-session+jwt', 'kid': agent.jkt, 'poppy_dlg': agent.delegation()})}.{segment(session_claims())}."
    elif alg == "HS256":
        header = {"typ": "poppy-session+jwt", "kid": agent.jkt, "poppy_dlg": agent.delegation()}
        value = hs256_with_public_key(header, session_claims(), agent.delegated)
    elif alg == "RS256":
        value = agent.session(header={"alg": "RS256"}, signer=rsa_key())
    else:
        value = agent.session(header={"alg": "ES384"}, signer=ECKey.generate_key("P-384"))
    refused(lambda: parse_poppy_session(value), "the Session JWT alg is not ES256", leaked=value)


@pytest.mark.parametrize("member", ["jwk", "jku", "x5u", "x5c"])
def test_adr_0004_s3_2_session_header_may_not_carry_a_key(agent: Agent, member: str) -> None:
    """ADR 0004 §3 step 2: jwk, jku, x5u and x5c are refused in the Session JWT header."""
    carried: Any = agent.delegated.as_dict(private=False) if member == "jwk" else "https://agent.example/k"
    value = agent.session(header={member: carried})
    refused(lambda: parse_poppy_session(value), "the Session JWT header must not carry a key or crit", leaked=value)


def test_adr_0004_s3_2_session_header_crit_is_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 2, RFC 7515 §4.1.11: a crit header is refused."""
    value = agent.session(header={"crit": ["exp"]})
    refused(lambda: parse_poppy_session(value), "the Session JWT header must not carry a key or crit", leaked=value)


def test_adr_0004_s3_2_duplicate_json_members_are_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 2, GUIDE-json-01: a second sub cannot hide behind the first."""
    header = {"alg": "ES256", "typ": "poppy-session+jwt", "kid": agent.jkt, "poppy_dlg": agent.delegation()}
    raw = b'{"iss":"%s","sub":"usr_a","sub":"usr_b"}' % CLIENT_ID.encode()
    value = sign(header, raw, agent.delegated)
    refused(lambda: parse_poppy_session(value), "the Session JWT claims are not a JSON object", leaked=value)


def test_adr_0004_s3_5_no_delegation_means_identity_key_signing_directly_fails(agent: Agent) -> None:
    """[S §3] "Direct identity-key signatures without delegation MUST fail": no poppy_dlg."""
    header = {"alg": "ES256", "typ": "poppy-session+jwt", "kid": agent.identity.kid}
    value = sign(header, session_claims(), agent.identity)
    refused(lambda: parse_poppy_session(value), "the Session JWT has no delegation", leaked=value)


# Step 3: the unverified iss.


@pytest.mark.parametrize("iss", ["http://agent.example/client.json", "agent.example", 7])
def test_adr_0004_s3_3_iss_must_be_https(agent: Agent, iss: object) -> None:
    """ADR 0004 §3 step 3: the client is an HTTPS URL (loopback http only in development)."""
    value = agent.session(iss=iss, delegation=agent.delegation(iss=iss))
    description = "the Session JWT iss is missing" if iss == 7 else "the Session JWT iss is not an https URL"
    refused(lambda: parse_poppy_session(value), description, leaked=value)


def test_adr_0004_s3_3_loopback_http_client_only_when_allowed(agent: Agent) -> None:
    """ADR 0004 §3 step 3: http://localhost is accepted only with allow_http_loopback (dev)."""
    value = agent.session(iss="http://localhost:8500/client.json")
    refused(lambda: parse_poppy_session(value), "the Session JWT iss is not an https URL")
    assert parse_poppy_session(value, allow_http_loopback=True).client_id == "http://localhost:8500/client.json"


# Step 4: the delegation.


def test_adr_0004_s3_4_delegation_typ_must_be_poppy_delegation_jwt(agent: Agent) -> None:
    """ADR 0004 §3 step 4, [S §3]: the delegation typ is poppy-delegation+jwt."""
    value = agent.session(delegation=agent.delegation(header={"typ": "poppy-session+jwt"}))
    refused(lambda: parse_poppy_session(value), "the delegation typ is not poppy-delegation+jwt", leaked=value)


def test_adr_0004_s3_4_delegation_ps384_accepted_with_an_rsa_identity_key() -> None:
    """[S §3]: PS384 (recommended) is accepted for the delegation when the identity key is RSA >= 2048."""
    agent = Agent(identity=rsa_key("rsa-id"))
    assert agent.verify(agent.session()).client_id == CLIENT_ID


def test_adr_0004_s3_4_delegation_ps384_refused_with_an_ec_identity_key(agent: Agent) -> None:
    """ADR 0004 §3 step 4: the identity key chosen by kid must fit alg; PS384 on an EC key is refused."""
    value = agent.session(delegation=agent.delegation(header={"alg": "PS384"}, signer=rsa_key("id-1")))
    refused(lambda: agent.verify(value), "the delegation alg does not fit its key", leaked=value)


def test_adr_0004_s3_4_delegation_ps384_refused_with_a_small_rsa_key() -> None:
    """ADR 0004 §3 step 4, GUIDE-jwt-01: an RSA identity key under 2048 bits does not fit PS384."""
    agent = Agent(identity=rsa_key("rsa-small", bits=1024))
    refused(lambda: agent.verify(agent.session()), "the delegation alg does not fit its key")


@pytest.mark.parametrize("alg", ["none", "HS256", "RS256"])
def test_adr_0004_s3_4_delegation_alg_is_es256_or_ps384(agent: Agent, alg: str) -> None:
    """[S §3]: a delegation is ES256 or PS384; none, HMAC and RS256 are refused."""
    if alg == "HS256":
        header = {"typ": "poppy-delegation+jwt", "kid": "id-1"}
        delegation = hs256_with_public_key(header, delegation_claims(agent.delegated), agent.identity)
    elif alg == "none":
        header = {"alg": "none", "typ": "poppy-delegation+jwt", "kid": "id-1"}
        delegation = f"{segment(header)}.{segment(delegation_claims(agent.delegated))}."
    else:
        delegation = agent.delegation(header={"alg": "RS256"}, signer=rsa_key("id-1"))
    value = agent.session(delegation=delegation)
    refused(lambda: parse_poppy_session(value), "the delegation alg is not accepted", leaked=value)


def test_adr_0004_s3_4_delegation_unknown_kid_raises_unknown_agent_key_id(agent: Agent) -> None:
    """ADR 0004 §3 step 4: a kid no identity key has is UnknownAgentKeyId (an UnknownKeyId): reload once."""
    value = agent.session(delegation=agent.delegation(header={"kid": "rotated-away"}))
    with pytest.raises(UnknownAgentKeyId) as caught:
        agent.verify(value)
    assert isinstance(caught.value, UnknownKeyId)
    assert caught.value.code is ErrorCode.INVALID_SESSION
    assert caught.value.description == "the delegation key is unknown"


def test_adr_0004_s3_4_delegation_signature_by_another_key_is_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 4: the delegation must be signed by the identity key its kid names."""
    value = agent.session(delegation=agent.delegation(signer=Agent().identity))
    refused(lambda: agent.verify(value), "the delegation signature is invalid", leaked=value)


def test_adr_0004_s3_4_session_iss_must_equal_delegation_iss(agent: Agent) -> None:
    """ADR 0004 §3 step 4, [S §3]: the delegation's iss is the client the Session JWT names."""
    value = agent.session(delegation=agent.delegation(iss="https://other-agent.example/client.json"))
    refused(lambda: agent.verify(value), "the delegation iss is not the client", leaked=value)


def test_adr_0004_s3_4_expired_delegation_is_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 4: an expired delegation (beyond the 60 s skew) is refused."""
    value = agent.session(delegation=agent.delegation(iat=NOW - 7200, exp=NOW - 61))
    refused(lambda: agent.verify(value), "the delegation has expired", leaked=value)


def test_adr_0004_s3_4_delegation_lifetime_over_24_hours_is_refused(agent: Agent) -> None:
    """[S §3] "exp at most 24 hours later": one second more is refused; exactly 24 h is accepted."""
    too_long = agent.session(delegation=agent.delegation(iat=NOW - 10, exp=NOW - 10 + MAX_DELEGATION_LIFETIME + 1))
    refused(lambda: agent.verify(too_long), "the delegation lifetime is over 24 hours", leaked=too_long)
    exactly = agent.session(delegation=agent.delegation(iat=NOW - 10, exp=NOW - 10 + MAX_DELEGATION_LIFETIME))
    assert agent.verify(exactly).delegation_exp == NOW - 10 + MAX_DELEGATION_LIFETIME


def test_adr_0004_s3_4_delegation_iat_in_the_future_is_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 4: a delegation iat more than 60 s ahead is refused."""
    value = agent.session(delegation=agent.delegation(iat=NOW + 61, exp=NOW + 3600))
    refused(lambda: agent.verify(value), "the delegation is issued in the future", leaked=value)


@pytest.mark.parametrize("claim", ["sub", "aud", "sid", "agent_id"])
def test_adr_0004_s3_4_delegation_naming_user_company_session_or_agent_is_refused(agent: Agent, claim: str) -> None:
    """[S §3] "No User ID, Company identifier, Agent ID" in a delegation; ADR 0004 §3 step 4 [Q5]."""
    value = agent.session(delegation=agent.delegation(**{claim: "usr_x"}))
    refused(lambda: agent.verify(value), "the delegation must not name a user, company, Session or agent")


def test_adr_0004_s3_4_delegation_without_jti_is_refused(agent: Agent) -> None:
    """[S §3]: the delegation carries a unique jti."""
    claims = delegation_claims(agent.delegated)
    del claims["jti"]
    delegation = sign({"alg": "ES256", "typ": "poppy-delegation+jwt", "kid": "id-1"}, claims, agent.identity)
    refused(lambda: agent.verify(agent.session(delegation=delegation)), "the delegation jti is missing")


def test_adr_0004_s3_4_cnf_jwk_with_d_is_refused(agent: Agent) -> None:
    """[S §3] "No ... private JWK members": a delegated key with d is refused."""
    value = agent.session(delegation=agent.delegation(cnf={"jwk": agent.delegated.as_dict(private=True)}))
    refused(lambda: agent.verify(value), "the delegation cnf.jwk must hold a public key only", leaked=value)


def test_adr_0004_s3_4_cnf_jwk_not_p256_is_refused(agent: Agent) -> None:
    """[S §3]: the delegated key is ES256/P-256; a P-384 key is refused."""
    p384 = ECKey.generate_key("P-384")
    value = agent.session(delegation=agent.delegation(cnf={"jwk": p384.as_dict(private=False)}))
    refused(lambda: agent.verify(value), "the delegated key is not an EC P-256 key", leaked=value)


@pytest.mark.parametrize("cnf", [{"jwk": "a-string"}, {"jwk": ["EC"]}, {"jkt": "abc"}])
def test_adr_0004_s3_4_cnf_jwk_not_an_object_is_refused(agent: Agent, cnf: dict[str, Any]) -> None:
    """ADR 0004 §3 step 4: cnf.jwk must be a JWK object."""
    value = agent.session(delegation=agent.delegation(cnf=cnf))
    refused(lambda: agent.verify(value), "the delegation cnf.jwk is not a JWK object", leaked=value)


# Step 5: the Session JWT's key.


def test_rfc_7638_session_kid_must_be_the_delegated_key_thumbprint(agent: Agent) -> None:
    """ADR 0004 §3 step 5, RFC 7638: kid is the delegated key's thumbprint, not any name."""
    value = agent.session(header={"kid": "key-1"})
    refused(lambda: agent.verify(value), "the Session JWT kid is not the delegated key thumbprint", leaked=value)


def test_adr_0004_s3_5_session_signed_by_identity_key_with_a_delegation_fails(agent: Agent) -> None:
    """[S §3]: a JWT the identity key signed itself fails even with a valid poppy_dlg attached."""
    value = agent.session(signer=agent.identity)
    refused(lambda: agent.verify(value), "the Session JWT signature is invalid", leaked=value)
    named = agent.session(signer=agent.identity, header={"kid": agent.identity.kid})
    refused(lambda: agent.verify(named), "the Session JWT kid is not the delegated key thumbprint", leaked=named)


def test_adr_0004_s3_5_key_rotation_between_requests_keeps_the_session() -> None:
    """[S §3] "Delegated keys MUST be allowed to rotate between requests": same sid, two keys, both verify."""
    first = Agent()
    second = Agent(identity=first.identity)
    one = first.verify(first.session())
    two = second.verify(second.session())
    assert one.sid == two.sid and one.sub == two.sub
    assert one.delegated_jkt != two.delegated_jkt


# Step 6: the claims.


@pytest.mark.parametrize("aud", [ISSUER + "/", [ISSUER], "https://auth.frontdoor.example/shop-b", None])
def test_adr_0004_s2_aud_is_the_issuer_exactly(agent: Agent, aud: object) -> None:
    """ADR 0004 §2, [S §2, §3]: aud is one string equal to the issuer (no trailing-slash normalisation, no array)."""
    value = agent.session(aud=aud)
    refused(lambda: agent.verify(value), "the Session JWT aud is not this company", leaked=value)


@pytest.mark.parametrize("claim", ["sid", "sub"])
@pytest.mark.parametrize("bad", ["", "a" * 257, "a+b", "a/b", "ab=", None])
def test_q14_sid_and_sub_syntax(agent: Agent, claim: str, bad: str | None) -> None:
    """ADR 0004 §3 step 6 [Q14]: sid and sub match ^[A-Za-z0-9_-]{1,256}$; 256 characters are accepted."""
    value = agent.session(**{claim: bad})
    refused(lambda: agent.verify(value), "the Session JWT sid or sub is malformed")
    assert agent.verify(agent.session(**{claim: "A" * 256}))


@pytest.mark.parametrize("agent_id", ["", "x" * 257, "tab\there", "caf\u00e9", 12])
def test_adr_0004_s3_6_agent_id_syntax(agent: Agent, agent_id: object) -> None:
    """ADR 0004 §3 step 6: agent_id, when present, is 1-256 printable ASCII characters."""
    value = agent.session(agent_id=agent_id)
    refused(lambda: agent.verify(value), "the Session JWT agent_id is malformed")


def test_rfc_9449_htm_must_be_the_method(agent: Agent) -> None:
    """ADR 0004 §3 step 6, RFC 9449 §4.3: htm is the request method, compared exactly."""
    value = agent.session(htm="GET")
    refused(lambda: agent.verify(value), "the Session JWT htm does not match the request", leaked=value)


@pytest.mark.parametrize(
    "htu",
    [
        URL + "?page=2",
        URL + "#frag",
        "https://other.example/api/orders",
        "https://shop.example:8443/api/orders",
        "https://shop.example/api/orders/1",
        "http://shop.example/api/orders",
    ],
)
def test_rfc_9449_htu_must_be_the_request_url_without_query(agent: Agent, htu: str) -> None:
    """ADR 0004 §3 step 6, RFC 9449 §4.3: htu has no query and names this host, port and path."""
    value = agent.session(htu=htu)
    refused(lambda: agent.verify(value, url=URL + "?page=2"), "the Session JWT htu does not match the request")


def test_rfc_9449_htu_is_compared_normalised(agent: Agent) -> None:
    """RFC 9449 §4.3: scheme/host case and the default port do not matter; the request's query is ignored."""
    value = agent.session(htu="HTTPS://Shop.Example:443/api/orders")
    assert agent.verify(value, url=URL + "?page=2")


@pytest.mark.parametrize("offset", [-61, 61])
def test_q2_iat_outside_the_window_is_refused(agent: Agent, offset: int) -> None:
    """ADR 0004 §3 step 6 [Q2]: iat within +/-60 s; stale or future beyond the window is refused."""
    value = agent.session(iat=NOW + offset)
    refused(lambda: agent.verify(value), "the Session JWT iat is outside the acceptance window")
    assert agent.verify(agent.session(iat=NOW + (60 if offset > 0 else -60)))


def test_adr_0004_s3_6_exp_passed_is_refused(agent: Agent) -> None:
    """ADR 0004 §3 step 6: exp, if present, has not passed."""
    value = agent.session(exp=NOW)
    refused(lambda: agent.verify(value), "the Session JWT has expired", leaked=value)


def test_adr_0004_s3_6_missing_jti_is_refused(agent: Agent) -> None:
    """[S §3]: every Session JWT has a unique jti (1-256 characters)."""
    claims = session_claims()
    del claims["jti"]
    header = {"alg": "ES256", "typ": "poppy-session+jwt", "kid": agent.jkt, "poppy_dlg": agent.delegation()}
    value = sign(header, claims, agent.delegated)
    refused(lambda: agent.verify(value), "the Session JWT jti is missing")
    refused(lambda: agent.verify(agent.session(jti="x" * 257)), "the Session JWT jti is missing")


# Step 7: ath.


def test_s3_ath_missing_with_a_token_is_refused(agent: Agent) -> None:
    """[S §3] "ath Required ... when an access token is sent"."""
    refused(lambda: agent.verify(agent.session(), token="tok-abc"), "the Session JWT has no ath for the access token")


def test_s3_ath_without_a_token_is_refused(agent: Agent) -> None:
    """[S §3] "ath ... forbidden without one"."""
    value = agent.session(ath=ath("tok-abc"))
    refused(lambda: agent.verify(value), "the Session JWT has ath but no access token was sent")


def test_s3_ath_of_another_token_is_refused(agent: Agent) -> None:
    """[S §3], RFC 9449 §4.2: ath is BASE64URL(SHA-256(token)) of the token sent."""
    value = agent.session(token="tok-abc")
    refused(lambda: agent.verify(value, token="tok-xyz"), "the Session JWT ath does not match the access token")
    assert agent.verify(value, token="tok-abc")


def test_refusal_descriptions_never_quote_the_request(agent: Agent) -> None:
    """[S §4]: nothing from the request is echoed; a bad sub's value appears nowhere in the error."""
    marker = "LEAKMARKERxyz"
    value = agent.session(sub=marker + "+", jti=jti())
    error = refused(lambda: agent.verify(value), "the Session JWT sid or sub is malformed", leaked=value)
    assert marker not in repr(error) and marker not in str(error.to_body())
    assert b64(marker.encode()) not in str(error)


@pytest.mark.parametrize(("header", "claims", "description"), [
    ({"kid": None}, {}, "the delegation has no kid"),
    ({"kid": 7}, {}, "the delegation has no kid"),
    ({"jwk": {"kty": "EC"}}, {}, "the delegation header must not carry a key"),
    ({"typ": "POPPY-DELEGATION+JWT"}, {}, "the delegation typ is not poppy-delegation+jwt"),  # typ compared exactly
])
def test_adr_0004_s3_4_delegation_header_refusals(
    agent: Agent, header: dict[str, Any], claims: dict[str, Any], description: str
) -> None:
    """ADR 0004 §3 step 4, GUIDE-jwt-03: kid a string, no key in the header, the exact typ."""
    value = agent.session(delegation=agent.delegation(header=header, **claims))
    refused(lambda: parse_poppy_session(value), description, leaked=value)


@pytest.mark.parametrize(("claims", "description"), [
    ({"cnf": "jwk"}, "the delegation cnf is missing"),
    ({"cnf": {"jwk": "x"}}, "the delegation cnf.jwk is not a JWK object"),
    ({"cnf": {"jwk": {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}}}, "the delegated key is not a valid key"),
    ({"iat": "now"}, "the delegation iat or exp is missing"),
    ({"iss": "https://other.example/client.json"}, "the delegation iss is not the client"),
    ({"exp": NOW - 10}, "the delegation lifetime is over 24 hours"),  # exp before iat
])
def test_adr_0004_s3_4_delegation_claim_refusals(agent: Agent, claims: dict[str, Any], description: str) -> None:
    """[S §3], RFC 7800 §3.2: cnf.jwk a public P-256 key; numeric iat/exp; iss the client."""
    value = agent.session(delegation=agent.delegation(**claims))
    refused(lambda: agent.verify(value), description)


@pytest.mark.parametrize(("header", "claims", "description"), [
    ({"kid": None}, {}, "the Session JWT has no kid"),
    ({"typ": "POPPY-SESSION+JWT"}, {}, "the Session JWT typ is not poppy-session+jwt"),  # typ compared exactly
    ({}, {"aud": [ISSUER]}, "the Session JWT aud is not this company"),  # one string, never an array
    ({}, {"aud": None}, "the Session JWT aud is not this company"),
    ({}, {"sub": None}, "the Session JWT sid or sub is malformed"),
    ({}, {"iat": NOW + 61}, "the Session JWT iat is outside the acceptance window"),
    ({}, {"iat": NOW - 61}, "the Session JWT iat is outside the acceptance window"),
    ({}, {"iat": None}, "the Session JWT iat is outside the acceptance window"),
    ({}, {"exp": "later"}, "the Session JWT has expired"),
    ({}, {"htu": URL + "?q=1"}, "the Session JWT htu does not match the request"),
    ({}, {"htm": None}, "the Session JWT htm does not match the request"),
])
def test_adr_0004_s3_6_session_jwt_refusals(
    agent: Agent, header: dict[str, Any], claims: dict[str, Any], description: str
) -> None:
    """ADR 0004 §3 steps 2 and 6, [S §3], [Q2], [Q14]: each failed check keeps its words."""
    value = agent.session(header=header, **claims)
    if "kid" in header or "typ" in header:
        refused(lambda: parse_poppy_session(value), description, leaked=value)
    else:
        refused(lambda: agent.verify(value), description, leaked=value)
