"""The login handoff's Frontdoor side against real PostgreSQL and Redis (ADR 0002).

The company is played with the sdk's helpers and its JWKS served by a pretend internet
behind the real SSRF-safe fetcher; the tenant is signed up and configured through the
console's ``PUT /api/v1/issuer``.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_protocol.login_handoff import LoginHandoffReason, verify_login_request
from frontdoor_sdk import build_login_response, login_jwks, login_signing_key
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.login_handoff import (
    LoginFailureReason,
    LoginHandoffFailed,
    LoginUrl,
    finish_login,
    start_login,
)
from frontdoor_tenancy.signing_keys import jwks
from joserfc.jwk import ECKey, KeySet
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.support.mock_web import MockWeb

LOGIN_URL = "https://login.company.example/signin"
ORIGIN = "https://login.company.example"
JWKS_URI = "https://login.company.example/.well-known/jwks.json"


async def configure(console: AsyncTestClient[Any], tenant: TenantHandle, login: dict[str, Any] | None) -> Any:
    current = await console.get("/api/v1/issuer", headers=tenant.auth)
    assert current.status_code == 200, current.text
    settings = {**current.json()["settings"], "login": login}
    return await console.put("/api/v1/issuer", json=settings, headers=tenant.auth)


class Company:
    """The company: its key, its JWKS on the pretend internet, its login page's answers."""

    def __init__(self) -> None:
        self.key = login_signing_key()
        self.web = MockWeb()
        self.publish(self.key)

    def publish(self, *keys: ECKey) -> None:
        self.web.serve(JWKS_URI, json=login_jwks(*keys))

    def jwks_fetches(self) -> int:
        return sum(1 for request in self.web.requests if request.url.path == "/.well-known/jwks.json")

    def respond(self, tenant: TenantHandle, request_jti: str, now: datetime, *, key: ECKey | None = None,
                account_id: str = "acct_ada", audience: str | None = None) -> str:
        signer = key or self.key
        return build_login_response(
            account_id=account_id, request_jti=request_jti, login_origin=ORIGIN, issuer=audience or tenant.issuer,
            key=signer, kid=signer.kid or "", now=now,
        )


@pytest.fixture
def company() -> Company:
    return Company()


@pytest.fixture
def kek(runtime: Runtime) -> Kek:
    return Kek.from_env_value(runtime.settings.kek)


@pytest.fixture
async def configured(console: AsyncTestClient[Any], tenant: TenantHandle) -> TenantHandle:
    r = await configure(console, tenant, {"url": LOGIN_URL, "jwks_uri": JWKS_URI})
    assert r.status_code == 200, r.text
    return tenant


async def start(db: Any, kek: Kek, tenant: TenantHandle, runtime: Runtime, now: datetime) -> LoginUrl:
    return await start_login(
        db, kek, tenant.id, issuer=tenant.issuer, return_to=f"{tenant.issuer}/login/callback",
        agent_name="Poppy Assistant", scopes=["poppy:read"], now=now, redis=runtime.redis,
    )


async def finish(db: Any, tenant: TenantHandle, runtime: Runtime, company: Company, response: str,
                 request_jti: str, now: datetime) -> str:
    return await finish_login(
        db, tenant.id, issuer=tenant.issuer, response_jwt=response, expected_request_jti=request_jti, now=now,
        redis=runtime.redis, fetcher=SafeFetcher(transport=company.web),
    )


async def refused(db: Any, tenant: TenantHandle, runtime: Runtime, company: Company, response: str,
                  request_jti: str, now: datetime) -> LoginHandoffFailed:
    with pytest.raises(LoginHandoffFailed) as raised:
        await finish(db, tenant, runtime, company, response, request_jti, now)
    assert raised.value.code == "login_failed"
    return raised.value


async def test_the_browser_is_sent_to_the_login_url_with_a_request_signed_by_the_issuer_key(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == LOGIN_URL
    (token,) = parse_qs(parts.query)["request"]
    published = KeySet.import_key_set(await jwks(db, configured.id, now))  # type: ignore[arg-type]
    request = verify_login_request(
        token, keys=published, issuer=configured.issuer, login_origin=ORIGIN, now=int(now.timestamp())
    )
    assert request.jti == url.request_jti
    assert (request.agent_name, request.scopes) == ("Poppy Assistant", ("poppy:read",))


async def test_the_request_jti_is_kept_only_while_it_can_be_answered(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime
) -> None:
    url = await start(db, kek, configured, runtime, runtime.clock())
    ttls = [await runtime.redis.ttl(key) async for key in runtime.redis.scan_iter(f"login:req:{{{configured.id}}}:*")]
    assert len(ttls) == 1 and 0 < ttls[0] <= 150
    assert url.request_jti not in str(await runtime.redis.keys(f"login:req:{{{configured.id}}}:*"))


async def test_a_signed_response_gives_the_account(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, url.request_jti, now)
    assert await finish(db, configured, runtime, company, response, url.request_jti, now) == "acct_ada"


async def test_a_replayed_response_is_refused(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, url.request_jti, now)
    await finish(db, configured, runtime, company, response, url.request_jti, now)
    error = await refused(db, configured, runtime, company, response, url.request_jti, now)
    assert error.reason is LoginFailureReason.REPLAYED


async def test_a_request_is_answered_once(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    await finish(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                 url.request_jti, now)
    second = company.respond(configured, url.request_jti, now, account_id="acct_grace")
    error = await refused(db, configured, runtime, company, second, url.request_jti, now)
    assert error.reason is LoginFailureReason.UNKNOWN_REQUEST


async def test_a_response_to_a_request_never_issued_is_refused(
    db: Any, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    made_up = secrets.token_urlsafe(32)
    error = await refused(db, configured, runtime, company, company.respond(configured, made_up, now), made_up, now)
    assert error.reason is LoginFailureReason.UNKNOWN_REQUEST


async def test_a_response_to_another_browsers_request_is_refused(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    theirs = await start(db, kek, configured, runtime, now)
    mine = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, theirs.request_jti, now)
    error = await refused(db, configured, runtime, company, response, mine.request_jti, now)
    assert error.reason is LoginHandoffReason.WRONG_REQUEST


async def test_a_response_for_another_audience_is_refused(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, url.request_jti, now, audience="https://issuer.frontdoor.test/another")
    error = await refused(db, configured, runtime, company, response, url.request_jti, now)
    assert error.reason is LoginHandoffReason.WRONG_AUDIENCE


async def test_an_expired_response_is_refused(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, url.request_jti, now)
    error = await refused(db, configured, runtime, company, response, url.request_jti, now + timedelta(seconds=91))
    assert error.reason is LoginHandoffReason.EXPIRED


async def test_a_response_forged_with_an_unpublished_key_is_refused(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    forger = ECKey.import_key({**login_signing_key().as_dict(private=True), "kid": company.key.kid or ""})
    error = await refused(db, configured, runtime, company, company.respond(configured, url.request_jti, now,
                                                                             key=forger), url.request_jti, now)
    assert error.reason is LoginHandoffReason.BAD_SIGNATURE


async def test_the_company_jwks_is_cached(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    for _ in range(2):
        url = await start(db, kek, configured, runtime, now)
        await finish(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                     url.request_jti, now)
    assert company.jwks_fetches() == 1


async def test_a_rotated_company_key_is_found_by_one_refetch(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    await finish(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                 url.request_jti, now)
    rotated = login_signing_key()
    company.publish(company.key, rotated)
    url = await start(db, kek, configured, runtime, now)
    response = company.respond(configured, url.request_jti, now, key=rotated)
    assert await finish(db, configured, runtime, company, response, url.request_jti, now) == "acct_ada"
    assert company.jwks_fetches() == 2


async def test_unknown_kids_do_not_refetch_more_than_once_in_30_seconds(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    now = runtime.clock()
    for _ in range(3):
        url = await start(db, kek, configured, runtime, now)
        error = await refused(db, configured, runtime, company, company.respond(
            configured, url.request_jti, now, key=login_signing_key()), url.request_jti, now)
        assert error.reason is LoginHandoffReason.UNKNOWN_KEY
    assert company.jwks_fetches() == 2  # the first load, then one refetch


async def test_an_unreachable_company_jwks_fails_the_handoff(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    company.web.forget("login.company.example")
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    error = await refused(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                          url.request_jti, now)
    assert error.reason is LoginFailureReason.KEYS_UNAVAILABLE


async def test_a_jwks_redirecting_off_the_login_host_is_not_trusted(
    db: Any, kek: Kek, configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    company.web.redirect(JWKS_URI, "https://keys.elsewhere.example/jwks.json")
    company.web.serve("https://keys.elsewhere.example/jwks.json", json=login_jwks(company.key))
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    error = await refused(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                          url.request_jti, now)
    assert error.reason is LoginFailureReason.KEYS_UNAVAILABLE


async def test_an_uploaded_public_key_verifies_without_any_fetch(
    db: Any, kek: Kek, console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, company: Company
) -> None:
    public_jwk = login_jwks(company.key)["keys"][0]
    r = await configure(console, tenant, {"url": LOGIN_URL, "public_jwk": public_jwk})
    assert r.status_code == 200, r.text
    now = runtime.clock()
    url = await start(db, kek, tenant, runtime, now)
    response = company.respond(tenant, url.request_jti, now)
    assert await finish(db, tenant, runtime, company, response, url.request_jti, now) == "acct_ada"
    assert company.web.requests == []


async def test_without_a_login_setting_there_is_no_handoff(
    db: Any, kek: Kek, tenant: TenantHandle, runtime: Runtime
) -> None:
    with pytest.raises(LoginHandoffFailed) as raised:
        await start(db, kek, tenant, runtime, runtime.clock())
    assert raised.value.reason is LoginFailureReason.NOT_CONFIGURED


async def test_a_request_of_tenant_a_cannot_be_finished_under_tenant_b(
    db: Any, kek: Kek, console: AsyncTestClient[Any], configured: TenantHandle, runtime: Runtime, company: Company
) -> None:
    other = await sign_up(console)
    assert (await configure(console, other, {"url": LOGIN_URL, "jwks_uri": JWKS_URI})).status_code == 200
    now = runtime.clock()
    url = await start(db, kek, configured, runtime, now)
    # Even a response addressed to B, for A's request, finds no such request under B.
    response = company.respond(other, url.request_jti, now)
    error = await refused(db, other, runtime, company, response, url.request_jti, now)
    assert error.reason is LoginFailureReason.UNKNOWN_REQUEST
    # And A's request is still answerable under A.
    assert await finish(db, configured, runtime, company, company.respond(configured, url.request_jti, now),
                        url.request_jti, now) == "acct_ada"


@pytest.mark.parametrize(("login", "field"), [
    ({"url": "http://login.company.example/signin", "jwks_uri": JWKS_URI}, "login.url"),
    ({"url": LOGIN_URL + "?next=1", "jwks_uri": JWKS_URI}, "login.url"),
    ({"url": LOGIN_URL, "jwks_uri": "https://keys.elsewhere.example/jwks.json"}, "login.jwks_uri"),
    ({"url": LOGIN_URL}, "login"),
    ({"url": LOGIN_URL, "jwks_uri": JWKS_URI, "public_jwk": {"kty": "EC"}}, "login"),
    ({"url": LOGIN_URL, "public_jwk": {"kty": "EC", "crv": "P-256", "kid": "k", "x": "AA", "y": "AA"}},
     "login.public_jwk"),
])
async def test_an_unusable_login_setting_is_refused_by_field(
    console: AsyncTestClient[Any], tenant: TenantHandle, login: dict[str, Any], field: str
) -> None:
    r = await configure(console, tenant, login)
    assert r.status_code == 422, r.text
    assert field in str(r.json())


async def test_an_uploaded_private_key_is_refused_and_not_echoed(
    console: AsyncTestClient[Any], tenant: TenantHandle
) -> None:
    private = login_signing_key().as_dict(private=True)
    r = await configure(console, tenant, {"url": LOGIN_URL, "public_jwk": private})
    assert r.status_code == 422
    assert "login.public_jwk" in r.text and str(private["d"]) not in r.text


async def test_a_loopback_login_page_is_allowed_in_development(
    console: AsyncTestClient[Any], tenant: TenantHandle
) -> None:
    r = await configure(console, tenant, {"url": "http://127.0.0.1:8001/login",
                                          "jwks_uri": "http://127.0.0.1:8001/.well-known/jwks.json"})
    assert r.status_code == 200, r.text
    assert r.json()["settings"]["login"]["url"] == "http://127.0.0.1:8001/login"

