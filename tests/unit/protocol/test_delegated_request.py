"""PAP 1.0 requests: Poppy-Session + optional access token + DPoP (ADR 0004 §3, §4; [S §3, §5]; RFC 9449)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from frontdoor_protocol import (
    ChallengeScheme,
    DelegatedCaller,
    ErrorCode,
    ProtocolError,
    UnknownAgentKeyId,
    UnknownKeyId,
    jws_verification,
    parse_delegated_request,
    verify_delegated_request,
)
from frontdoor_protocol.delegated_request import authorization_credentials

from .jose_helpers import ISSUER, NOW, ec_key, jti, sign
from .pap10_helpers import METHOD, URL, Agent, access_token, ath, issuer_keys


def dpop_proof(key: Any, token: str, *, htm: str = METHOD, htu: str = URL, with_ath: bool = True) -> str:
    claims: dict[str, Any] = {"jti": jti(), "htm": htm, "htu": htu, "iat": NOW}
    if with_ath:
        claims["ath"] = ath(token)
    return sign({"alg": "ES256", "typ": "dpop+jwt", "jwk": key.as_dict(private=False)}, claims, key)


def run(agent: Agent, headers: list[tuple[str, str]], **kwargs: Any) -> DelegatedCaller:
    request = parse_delegated_request(headers=headers, url=kwargs.pop("url", URL))
    return verify_delegated_request(
        request,
        method=METHOD,
        url=URL,
        identity_keys=agent.keys,
        issuer_keys=issuer_keys(),
        issuer=ISSUER,
        now=NOW,
        **kwargs,
    )


def refused(action: Callable[[], Any], code: ErrorCode, description: str, *secrets: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        action()
    error = caught.value
    assert error.code is code
    assert error.description == description
    for secret in secrets:
        for part in secret.split("."):
            assert part[:12] not in str(error) and part[:12] not in str(error.challenge())
    return error


@pytest.fixture
def agent() -> Agent:
    return Agent()


def test_adr_0004_s3_signed_out_request_has_no_token(agent: Agent) -> None:
    """[S §5]: a signed-out request carries a Session JWT and no token."""
    caller = run(agent, [("Poppy-Session", agent.session())])
    assert caller.token is None and caller.scheme is None and caller.proof is None


def test_adr_0004_s4_signed_in_dpop_request_verifies_with_four_signatures(agent: Agent) -> None:
    """ADR 0004 §4, brief item 5: delegation + Session JWT + access token + DPoP proof = 4 verifies, no more."""
    dpop_key = ec_key(None)
    token = access_token(bound_to=_jkt(dpop_key))
    headers = [
        ("Poppy-Session", agent.session(token=token)),
        ("Authorization", "dpop " + token),  # scheme compared case-insensitively [S §5]
        ("DPoP", dpop_proof(dpop_key, token)),
    ]
    with mock.patch.object(
        jws_verification.JWSRegistry.algorithms["ES256"],
        "verify",
        wraps=jws_verification.JWSRegistry.algorithms["ES256"].verify,
    ) as counted:
        caller = run(agent, headers)
    assert counted.call_count == 4
    assert caller.scheme is ChallengeScheme.DPOP and caller.token is not None and caller.proof is not None
    assert caller.token.sub == "acct_42" and caller.session.client_id == caller.token.client_id


def test_s5_bearer_token_signed_in_verifies(agent: Agent) -> None:
    """[S §5] "Tokens may be Bearer or DPoP": an unbound token with the Bearer scheme."""
    token = access_token()
    caller = run(agent, [("Poppy-Session", agent.session(token=token)), ("Authorization", "BEARER " + token)])
    assert caller.scheme is ChallengeScheme.BEARER and caller.proof is None


def test_s3_same_client_binding(agent: Agent) -> None:
    """[S §3] "same-client binding": the token's client_id must be the Session's iss."""
    token = access_token(client_id="https://other-agent.example/client.json")
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "Bearer " + token)]
    refused(lambda: run(agent, headers), ErrorCode.INVALID_TOKEN, "the access token is for another client", token)


def test_adr_0004_s4_token_audiences_are_passed_through(agent: Agent) -> None:
    """ADR 0004 §4: a token for a listed resource verifies where that resource is an audience."""
    token = access_token(aud="https://shop.example")
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "Bearer " + token)]
    refused(lambda: run(agent, headers), ErrorCode.INVALID_TOKEN, "access token is for another resource", token)
    assert run(agent, headers, audiences=["https://shop.example"]).token is not None


def test_rfc_9449_s7_1_dpop_bound_token_sent_as_bearer_is_refused(agent: Agent) -> None:
    """RFC 9449 §7.1: a DPoP-bound token must use the DPoP scheme."""
    token = access_token(bound_to="jkt-1")
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "Bearer " + token)]
    refused(
        lambda: run(agent, headers),
        ErrorCode.INVALID_TOKEN,
        "a DPoP-bound token must be sent with the DPoP scheme",
        token,
    )


def test_rfc_9449_s7_1_unbound_token_sent_as_dpop_is_refused(agent: Agent) -> None:
    """RFC 9449 §7.1: an unbound token is a Bearer token."""
    token = access_token()
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "DPoP " + token)]
    refused(
        lambda: run(agent, headers),
        ErrorCode.INVALID_TOKEN,
        "a Bearer token must be sent with the Bearer scheme",
        token,
    )


def test_rfc_9449_dpop_proof_missing_is_refused(agent: Agent) -> None:
    """ADR 0004 §4: a DPoP-bound token needs its DPoP proof."""
    token = access_token(bound_to="jkt-1")
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "DPoP " + token)]
    refused(
        lambda: run(agent, headers), ErrorCode.INVALID_DPOP_PROOF, "the request needs exactly one DPoP header", token
    )


@pytest.mark.parametrize("with_ath", [False, True])
def test_rfc_9449_dpop_proof_ath_missing_or_wrong_is_refused(agent: Agent, with_ath: bool) -> None:
    """RFC 9449 §4.3 check 11, ADR 0004 §7: the proof's ath is the token's; 401 invalid_dpop_proof."""
    dpop_key = ec_key(None)
    token = access_token(bound_to=_jkt(dpop_key))
    proof = dpop_proof(dpop_key, access_token(bound_to=_jkt(dpop_key)), with_ath=with_ath)
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "DPoP " + token), ("DPoP", proof)]
    error = refused(
        lambda: run(agent, headers),
        ErrorCode.INVALID_DPOP_PROOF,
        "DPoP proof ath does not match the access token",
        token,
        proof,
    )
    assert error.challenge() is not None and error.challenge().startswith('DPoP error="invalid_dpop_proof"')  # type: ignore[union-attr]


def test_rfc_9449_dpop_proof_by_another_key_is_refused(agent: Agent) -> None:
    """RFC 9449 §4.3 check 12: the proof's key is the one cnf.jkt names."""
    token = access_token(bound_to=_jkt(ec_key(None)))
    proof = dpop_proof(ec_key(None), token)
    headers = [("Poppy-Session", agent.session(token=token)), ("Authorization", "DPoP " + token), ("DPoP", proof)]
    refused(
        lambda: run(agent, headers),
        ErrorCode.INVALID_DPOP_PROOF,
        "DPoP proof key is not the one the token is bound to",
        token,
    )


def test_adr_0004_s3_session_is_checked_with_the_token_ath(agent: Agent) -> None:
    """[S §3]: the Session JWT's ath binds the token sent; a JWT without ath beside a token is invalid_session."""
    token = access_token()
    headers = [("Poppy-Session", agent.session()), ("Authorization", "Bearer " + token)]
    refused(lambda: run(agent, headers), ErrorCode.INVALID_SESSION, "the Session JWT has no ath for the access token")


def test_adr_0004_s3_unknown_agent_kid_and_unknown_issuer_kid_are_told_apart(agent: Agent) -> None:
    """ADR 0004 §6: the delegation's unknown kid is UnknownAgentKeyId; the issuer's is plain UnknownKeyId."""
    stale = Agent(identity=ec_key("id-2"), delegated=agent.delegated)
    with pytest.raises(UnknownAgentKeyId):
        run(agent, [("Poppy-Session", stale.session())])
    token = access_token(key=ec_key("issuer-9"))
    with pytest.raises(UnknownKeyId) as caught:
        run(agent, [("Poppy-Session", agent.session(token=token)), ("Authorization", "Bearer " + token)])
    assert not isinstance(caught.value, UnknownAgentKeyId)


def test_adr_0004_s3_1_missing_poppy_session_is_invalid_session() -> None:
    """ADR 0004 §7: a 1.0 request without Poppy-Session is invalid_session."""
    refused(
        lambda: parse_delegated_request(headers=[], url=URL),
        ErrorCode.INVALID_SESSION,
        "the request has no Poppy-Session header",
    )


def test_rfc_6750_s2_3_token_in_url_is_refused(agent: Agent) -> None:
    """RFC 6750 §2.3, PAP-4.3-17: no access token in the URL, even beside a valid header."""
    refused(
        lambda: parse_delegated_request(headers=[("Poppy-Session", agent.session())], url=URL + "?access_token=abc"),
        ErrorCode.INVALID_REQUEST,
        "access tokens are not accepted in the URL",
    )


@pytest.mark.parametrize(
    "authorizations",
    [
        ["Bearer aaa, DPoP bbb"],
        ["Bearer aaa", "DPoP bbb"],
        ["DPoP aaa,Bearer bbb"],
        ['Basic realm="x", Bearer aaa'],
    ],
)
def test_s5_two_credentials_are_refused(agent: Agent, authorizations: list[str]) -> None:
    """[S §5], ADR 0004 §4, RFC 6750 §3.1: at most one credential in Authorization (values or headers)."""
    headers = [("Poppy-Session", agent.session()), *(("Authorization", value) for value in authorizations)]
    error = refused(
        lambda: parse_delegated_request(headers=headers, url=URL),
        ErrorCode.INVALID_REQUEST,
        "the request has more than one Authorization header"
        if len(authorizations) > 1
        else "the request has more than one credential",
    )
    assert "aaa" not in str(error) and "bbb" not in str(error)


def test_rfc_7235_scheme_names_inside_quoted_params_are_ignored() -> None:
    """RFC 7235 §2.1, RFC 9110 §5.6.4: a comma or scheme name inside a quoted string starts no credential."""
    assert authorization_credentials('Custom realm="a, Bearer b", x=1') == ['Custom realm="a, Bearer b", x=1']
    assert authorization_credentials('Custom k="q\\", DPoP z"') == ['Custom k="q\\", DPoP z"']
    assert authorization_credentials("Bearer abc==") == ["Bearer abc=="]
    assert authorization_credentials("Bearer a, DPoP b") == ["Bearer a", "DPoP b"]


def test_rfc_7235_other_scheme_is_no_access_token(agent: Agent) -> None:
    """ADR 0004 §4: only Bearer and DPoP carry an access token; another scheme leaves the request signed out."""
    request = parse_delegated_request(
        headers=[("Poppy-Session", agent.session()), ("Authorization", 'Basic realm="Bearer x"')], url=URL
    )
    assert request.access_token is None and request.scheme is None


def test_rfc_6750_malformed_token_is_invalid_token(agent: Agent) -> None:
    """RFC 6750 §2.1: the token is a token68."""
    refused(
        lambda: parse_delegated_request(
            headers=[("Poppy-Session", agent.session()), ("Authorization", "Bearer a b")], url=URL
        ),
        ErrorCode.INVALID_TOKEN,
        "the access token is malformed",
    )


def _jkt(key: Any) -> str:
    from frontdoor_protocol import jwk_thumbprint

    return jwk_thumbprint(key.as_dict(private=False))
