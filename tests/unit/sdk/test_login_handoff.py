"""The sdk's login-page helpers: verify Frontdoor's request, answer with a signed response."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
from frontdoor_protocol.login_handoff import (
    LOGIN_RESPONSE_TYPE,
    build_login_request_claims,
    login_key_set,
    sign_login_request,
    verify_login_response,
)
from frontdoor_sdk import (
    JwksUnavailable,
    LoginHandoffError,
    LoginHandoffReason,
    build_login_response,
    issuer_key_source,
    login_jwks,
    login_signing_key,
    verify_login_request,
)
from joserfc.jwk import ECKey, KeySet

from .kit import ISSUER, NOW, Clock, FakeFrontdoor

ORIGIN = "https://shop.example"
WHEN = datetime.fromtimestamp(NOW, UTC)
REQUEST_JTI = "req_" + "r" * 40


def _request(key: ECKey, *, now: int = NOW, login_url: str = f"{ORIGIN}/login") -> str:
    claims = build_login_request_claims(
        issuer=ISSUER, login_url=login_url, return_to=f"{ISSUER}/login/callback", agent_name="Poppy",
        scopes=("orders:read",), jti=REQUEST_JTI, now=now,
    )
    return sign_login_request(claims, key, key.kid or "")


def _public(*keys: ECKey) -> KeySet:
    return KeySet([ECKey.import_key(key.as_dict(private=False)) for key in keys])


async def test_a_request_verifies_with_the_issuers_key_set() -> None:
    key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    request = await verify_login_request(
        _request(key), issuer=ISSUER, issuer_keys=_public(key), login_origin=ORIGIN, now=WHEN
    )
    assert (request.return_to, request.agent_name, request.scopes, request.jti) == (
        f"{ISSUER}/login/callback", "Poppy", ("orders:read",), REQUEST_JTI,
    )


async def test_a_request_verifies_with_the_issuers_published_jwks() -> None:
    frontdoor = FakeFrontdoor()
    async with frontdoor.client() as http:
        keys = issuer_key_source(ISSUER, http, clock=Clock())
        request = await verify_login_request(
            _request(frontdoor.keys[0]), issuer=ISSUER, issuer_keys=keys, login_origin=ORIGIN, now=WHEN
        )
    assert request.jti == REQUEST_JTI
    assert frontdoor.jwks_calls == 1


async def test_a_rotated_issuer_key_is_found_by_one_refetch() -> None:
    frontdoor = FakeFrontdoor()
    clock = Clock()
    async with frontdoor.client() as http:
        keys = issuer_key_source(ISSUER, http, clock=clock)
        await keys.keys()
        clock.advance(31)  # refetches on an unknown kid are at most one per 30 s
        rotated = ECKey.generate_key("P-256", parameters={"kid": "k2"})
        frontdoor.keys.append(rotated)
        request = await verify_login_request(
            _request(rotated), issuer=ISSUER, issuer_keys=keys, login_origin=ORIGIN, now=WHEN
        )
    assert request.jti == REQUEST_JTI
    assert frontdoor.jwks_calls == 2


async def test_a_request_signed_by_an_unpublished_key_is_forged() -> None:
    frontdoor = FakeFrontdoor()
    forger = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    async with frontdoor.client() as http:
        keys = issuer_key_source(ISSUER, http, clock=Clock())
        with pytest.raises(LoginHandoffError) as raised:
            await verify_login_request(_request(forger), issuer=ISSUER, issuer_keys=keys, login_origin=ORIGIN, now=WHEN)
    assert raised.value.reason is LoginHandoffReason.BAD_SIGNATURE


async def test_a_request_for_another_login_page_is_refused() -> None:
    key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    with pytest.raises(LoginHandoffError) as raised:
        await verify_login_request(
            _request(key, login_url="https://evil.example/login"), issuer=ISSUER, issuer_keys=_public(key),
            login_origin=ORIGIN, now=WHEN,
        )
    assert raised.value.reason is LoginHandoffReason.WRONG_AUDIENCE


async def test_an_expired_request_is_refused() -> None:
    key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    with pytest.raises(LoginHandoffError) as raised:
        await verify_login_request(
            _request(key, now=NOW - 151), issuer=ISSUER, issuer_keys=_public(key), login_origin=ORIGIN, now=WHEN
        )
    assert raised.value.reason is LoginHandoffReason.EXPIRED


async def test_unreachable_issuer_keys_fail_closed() -> None:
    frontdoor = FakeFrontdoor(unreachable=True)
    async with frontdoor.client() as http:
        keys = issuer_key_source(ISSUER, http, clock=Clock())
        with pytest.raises(JwksUnavailable):
            await verify_login_request(
                _request(frontdoor.keys[0]), issuer=ISSUER, issuer_keys=keys, login_origin=ORIGIN, now=WHEN
            )


def test_a_response_verifies_at_frontdoor_with_the_published_jwks() -> None:
    key = login_signing_key()
    token = build_login_response(
        account_id="acct_ada", request_jti=REQUEST_JTI, login_origin=ORIGIN, issuer=ISSUER, key=key,
        kid=key.kid or "", now=WHEN,
    )
    published = login_key_set(json.loads(json.dumps(login_jwks(key))))
    result = verify_login_response(
        token, keys=published, expected_issuer=ORIGIN, audience=ISSUER, expected_request_jti=REQUEST_JTI, now=NOW
    )
    assert result.account_id == "acct_ada"
    assert result.exp == NOW + 60


def test_a_response_is_explicitly_typed() -> None:
    key = login_signing_key()
    token = build_login_response(
        account_id="acct_ada", request_jti=REQUEST_JTI, login_origin=ORIGIN, issuer=ISSUER, key=key,
        kid=key.kid or "", now=WHEN,
    )
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "ES256", "typ": LOGIN_RESPONSE_TYPE, "kid": key.kid}


def test_each_response_has_a_fresh_jti() -> None:
    key = login_signing_key()
    tokens = {
        build_login_response(account_id="acct_ada", request_jti=REQUEST_JTI, login_origin=ORIGIN, issuer=ISSUER,
                             key=key, kid=key.kid or "", now=WHEN)
        for _ in range(2)
    }
    assert len(tokens) == 2


def test_a_response_for_an_account_id_frontdoor_refuses_is_not_built() -> None:
    key = login_signing_key()
    with pytest.raises(ValueError, match="account_id"):
        build_login_response(account_id="ada lovelace", request_jti=REQUEST_JTI, login_origin=ORIGIN, issuer=ISSUER,
                             key=key, kid=key.kid or "", now=WHEN)


def test_the_published_jwks_holds_no_private_member() -> None:
    (published,) = login_jwks(login_signing_key())["keys"]
    assert set(published) == {"kty", "crv", "x", "y", "kid", "use", "alg"}


def test_a_key_without_kid_cannot_be_published() -> None:
    with pytest.raises(ValueError, match="kid"):
        login_jwks(ECKey.generate_key("P-256"))


def test_a_generated_signing_key_is_named_by_its_thumbprint() -> None:
    key = login_signing_key()
    assert key.is_private and key.kid == key.thumbprint()


def test_an_imported_signing_key_keeps_its_kid() -> None:
    original = ECKey.generate_key("P-256", parameters={"kid": "northwind-2026"})
    assert login_signing_key(original.as_dict(private=True)).kid == "northwind-2026"


def test_a_public_jwk_is_not_a_signing_key() -> None:
    with pytest.raises(ValueError, match="private"):
        login_signing_key(ECKey.generate_key("P-256").as_dict(private=False))
