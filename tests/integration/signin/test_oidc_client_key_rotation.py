"""Rotating the ``private_key_jwt`` client key of an OpenID Connect connection.

A real ``oidc-provider`` client registered for ``private_key_jwt`` with Frontdoor's
``{issuer}/oidc/jwks.json`` as its ``jwks_uri``: the IdP fetches that URL itself, from a
loopback `FrontdoorStandIn` answering what the in-process issuer's JWKS answers at that
moment (``Cache-Control`` included; the test copies it over after each change).
A rotation from the dashboard publishes the new key at once; the old key keeps signing the
client assertions for the publish lead, then the new one does, and the IdP accepts it once
its cached copy of the JWKS is stale (this IdP caches it for the ``max-age``, 300 s, and
does not refetch on an unknown ``kid`` before: the reason for the 10-minute lead); the old
key stays published until it expires. The rotation rules themselves (supersede, conflict,
compromised, KEK re-encryption of both keys) are checked on the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import msgspec
import pytest
from frontdoor_core.errors import Conflict
from frontdoor_core.settings import Settings
from joserfc import jws
from litestar.testing import AsyncTestClient

from tests.integration.console.test_cli_and_openapi import run_cli
from tests.integration.console.test_cli_reencrypt_secrets import fresh  # noqa: F401 (a database of its own)
from tests.integration.console.test_dashboard import sign_in as admin_sign_in
from tests.integration.signin.conftest import new_agent
from tests.integration.signin.test_oidc_sign_in import BASE, SLUGS, Stage, staged
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import FrontdoorStandIn, OpenIdProvider, new_key

LEAD = timedelta(seconds=5)  # the test console's publish lead (production: 10 minutes)


@pytest.fixture(scope="module")
def stand_in() -> Iterator[FrontdoorStandIn]:
    server = FrontdoorStandIn()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def rot_idp(stand_in: FrontdoorStandIn) -> Iterator[OpenIdProvider]:
    client = {"client_id": "fd-pkrot", "token_endpoint_auth_method": "private_key_jwt",
              "token_endpoint_auth_signing_alg": "ES256", "jwks_uri": stand_in.jwks_url,
              "redirect_uris": [f"{BASE}/{s}/oidc/callback" for s in SLUGS], "grant_types": ["authorization_code"],
              "response_types": ["code"]}
    provider = OpenIdProvider([client], new_key("idp-rot-1"))
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture
async def short_lead_console(settings: Settings, clock: ShiftableClock, web: MockWeb
                             ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The dashboard, with a publish lead of `LEAD` so the test can live through it."""
    from frontdoor_console.app import create_app
    from frontdoor_core.outbound import SafeFetcher

    app = create_app(msgspec.structs.replace(settings, key_publish_lead=LEAD), clock=clock,
                     fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


def assertion_kid(stage: Stage) -> str:
    form = parse_qs(stage.internet.token_requests[-1].content.decode())
    return str(jws.extract_compact(form["client_assertion"][0].encode()).headers()["kid"])


async def kids(stage: Stage, stand_in: FrontdoorStandIn | None = None) -> list[str]:
    """The kids ``{issuer}/oidc/jwks.json`` publishes now; with ``stand_in``, the IdP's jwks_uri answers it too."""
    r = await stage.issuer.get(f"/{stage.tenant.slug}/oidc/jwks.json")
    assert r.status_code == 200 and r.headers["cache-control"] == "public, max-age=300"
    if stand_in is not None:
        stand_in.serve_jwks(r)
    return [k["kid"] for k in r.json()["keys"]]


async def sign_in_through_idp(stage: Stage, web: MockWeb) -> int:
    """A Device Sign-In through the IdP; the callback's status (303: the IdP accepted the assertion)."""
    agent = new_agent(web)
    session = await stage.company.session(agent, "alice")
    started, back_url = await stage.device_to_callback(agent, login="ada")
    back = await stage.back(back_url)
    if back.status_code != 303:
        return back.status_code
    assert (await stage.consent(["poppy:read"])).status_code == 200
    token = await stage.company.poll(agent, started["device_code"], session["session_id"])
    assert token.status_code == 200, token.text
    return 303


async def test_rotation_publishes_first_signs_after_the_lead_and_the_idp_accepts_it(
        settings: Settings, console: AsyncTestClient[Any], short_lead_console: AsyncTestClient[Any],
        clock: ShiftableClock, runtime: Any, web: MockWeb, rot_idp: OpenIdProvider,
        stand_in: FrontdoorStandIn) -> None:
    async with staged(settings, console, clock, runtime, web, rot_idp, client_id="fd-pkrot",
                      token_endpoint_auth_method="private_key_jwt") as stage:
        (first,) = await kids(stage, stand_in)
        fetched = stand_in.jwks_fetches
        assert await sign_in_through_idp(stage, web) == 303
        assert assertion_kid(stage) == first and stand_in.jwks_fetches == fetched + 1  # the IdP read jwks_uri

        # Rotate from the dashboard (confirmation first).
        dash = short_lead_console
        csrf = await admin_sign_in(dash, stage.tenant.email)
        page = await dash.get("/settings")
        assert first in page.text and "/settings/login/rotate-client-key" in page.text
        asked = await dash.post("/settings/login/rotate-client-key", data={"_csrf_token": csrf})
        assert asked.status_code == 200 and "Rotate the OpenID Connect client key?" in asked.text
        done = await dash.post("/settings/login/rotate-client-key", data={"_csrf_token": csrf, "confirm": "yes"},
                               follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"] == "/settings?notice=client_key_rotated"
        rotated_at = clock()
        published = await kids(stage, stand_in)
        assert len(published) == 2 and published[1] == first
        new = published[0]
        async with runtime.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT actor_type, target_id, details FROM audit_log WHERE tenant_id = $1"
                                      " AND action = 'oidc_client_key.rotated'", stage.tenant.id)
        assert row is not None and row["actor_type"] == "admin" and row["target_id"] == new
        details = row["details"] if isinstance(row["details"], dict) else msgspec.json.decode(row["details"])
        assert details["previous_kid"] == first and details["via"] == "dashboard" and not details["compromised"]

        # During the lead the old key still signs, and the IdP (its cached JWKS) accepts it.
        assert await sign_in_through_idp(stage, web) == 303
        assert assertion_kid(stage) == first

        clock.advance(seconds=LEAD.total_seconds() + 1)
        # After the lead the new key signs. This IdP cached the JWKS for its max-age (300 s) and
        # does not refetch before: with this test's 5-second lead it has not seen the new kid yet.
        assert await sign_in_through_idp(stage, web) == 400
        assert assertion_kid(stage) == new
        # Once its copy is stale (here: a restart; in production the 10-minute lead outlasts the
        # 300 s max-age) it fetches jwks_uri again, finds the new kid, and accepts the assertion.
        rot_idp.restart()
        fetched = stand_in.jwks_fetches
        assert await sign_in_through_idp(stage, web) == 303
        assert assertion_kid(stage) == new and stand_in.jwks_fetches == fetched + 1

        # The old key stays published until it expires: RETAIN_FOR after it stopped signing.
        from frontdoor_tenancy.oidc_client_key import RETAIN_FOR

        stops = rotated_at + LEAD
        clock.advance(seconds=(stops + RETAIN_FOR - clock()).total_seconds() - 2)
        assert await kids(stage) == [new, first]
        clock.advance(seconds=3)
        assert await kids(stage) == [new]


async def test_rotation_rules_on_the_database(settings: Settings, runtime: Any) -> None:
    from frontdoor_tenancy.credentials import Kek
    from frontdoor_tenancy.oidc_client_key import (
        RETAIN_FOR,
        ensure_client_key,
        load_client_key,
        public_client_jwks,
        rotate_client_key,
    )

    kek = Kek.from_env_value(settings.kek)
    lead = timedelta(minutes=10)
    t0 = datetime.now(UTC)
    tenant = f"ten_rot{int(t0.timestamp() * 1e6)}"
    async with runtime.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ($1, $2, 'Rot')", tenant,
                           f"rot-{tenant[-10:]}")
        try:
            assert await ensure_client_key(conn, kek, tenant, now=t0)

            async def state(at: datetime) -> tuple[list[str], str | None]:
                jwks = [k["kid"] for k in (await public_client_jwks(conn, tenant, now=at))["keys"]]
                key = await load_client_key(conn, kek, tenant, now=at)
                return jwks, None if key is None else str(key.kid)

            (k1,), signer = await state(t0)
            assert signer == k1
            async with conn.transaction():
                r2 = await rotate_client_key(conn, kek, tenant, now=t0, publish_lead=lead)
            assert r2.previous_kid == k1 and r2.activates_at == t0 + lead
            assert await state(t0) == ([r2.kid, k1], k1)
            # Rotating again while the new key waits supersedes it: it never signed, it leaves the JWKS.
            t1 = t0 + timedelta(minutes=1)
            async with conn.transaction():
                r3 = await rotate_client_key(conn, kek, tenant, now=t1, publish_lead=lead)
            assert r3.superseded_kid == r2.kid and r3.previous_kid == k1
            assert await state(t1) == ([r3.kid, k1], k1)
            assert (await state(t1 + lead - timedelta(seconds=1)))[1] == k1  # k1 signs until k3 activates
            assert (await state(t1 + lead))[1] == r3.kid
            # While k1 is still published (RETAIN_FOR after it stopped signing), no further rotation.
            t2 = t1 + lead + timedelta(minutes=1)
            with pytest.raises(Conflict) as refused:
                async with conn.transaction():
                    await rotate_client_key(conn, kek, tenant, now=t2, publish_lead=lead)
            assert refused.value.code == "client_key_rotation_pending"
            assert refused.value.extra["retry_after"] == int((t1 + lead + RETAIN_FOR - t2).total_seconds()) + 1
            t3 = t1 + lead + RETAIN_FOR
            assert await state(t3) == ([r3.kid], r3.kid)
            async with conn.transaction():
                r4 = await rotate_client_key(conn, kek, tenant, now=t3, publish_lead=lead)
            assert r4.previous_kid == r3.kid and await state(t3) == ([r4.kid, r3.kid], r3.kid)
            # Compromised: the new key signs now, every other key is unpublished now.
            async with conn.transaction():
                r5 = await rotate_client_key(conn, kek, tenant, now=t3, publish_lead=lead, compromised=True)
            assert r5.activates_at == t3 and r5.previous_kid is None
            assert await state(t3) == ([r5.kid], r5.kid)
            # The private halves are KEK blobs, never the JWK.
            row = await conn.fetchrow("SELECT key_ciphertext, public_jwk FROM oidc_client_keys WHERE tenant_id = $1",
                                      tenant)
            x = (msgspec.json.decode(row["public_jwk"]) if isinstance(row["public_jwk"], str) else row["public_jwk"])["x"]
            assert x.encode() not in bytes(row["key_ciphertext"])
        finally:
            await conn.execute("DELETE FROM tenants WHERE id = $1", tenant)


async def test_kek_rotation_reencrypts_both_client_keys(fresh: Any) -> None:  # noqa: F811
    from frontdoor_tenancy import oidc_client_key
    from frontdoor_tenancy.credentials import Kek, generate_kek_value

    old, new = generate_kek_value(), generate_kek_value()
    now = datetime.now(UTC)
    async with fresh.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ('ten_pkr', 'pk-rot2', 'PK')")
        await oidc_client_key.ensure_client_key(conn, Kek.from_env_value(old), "ten_pkr", now=now)
        async with conn.transaction():
            await oidc_client_key.rotate_client_key(conn, Kek.from_env_value(old), "ten_pkr", now=now,
                                                    publish_lead=timedelta(minutes=10))
    done = await oidc_client_key.reencrypt_oidc_client_keys(fresh.pool, Kek.from_env_value(f"{new},{old}"))
    assert done.reencrypted == 2 and not done.unreadable
    async with fresh.pool.acquire() as conn:
        for at in (now, now + timedelta(minutes=10)):  # the previous key signs now, the new one later
            assert await oidc_client_key.load_client_key(conn, Kek.from_env_value(new), "ten_pkr", now=at) is not None
            assert await oidc_client_key.load_client_key(conn, Kek.from_env_value(old), "ten_pkr", now=at) is None


async def test_the_cli_rotates_the_client_key(settings: Settings, console: AsyncTestClient[Any],
                                              clock: ShiftableClock, runtime: Any, web: MockWeb,
                                              rot_idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, rot_idp, client_id="fd-pkrot",
                      token_endpoint_auth_method="private_key_jwt") as stage:
        (first,) = await kids(stage)
        done = run_cli(settings, "rotate-oidc-client-key", stage.tenant.slug)
        assert done.returncode == 0, done.stderr
        published = await kids(stage)
        assert len(published) == 2 and published[1] == first and published[0] in done.stdout
        async with runtime.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT actor_type, details FROM audit_log WHERE tenant_id = $1"
                                      " AND action = 'oidc_client_key.rotated'", stage.tenant.id)
        details = row["details"] if isinstance(row["details"], dict) else msgspec.json.decode(row["details"])
        assert row["actor_type"] == "system" and details["via"] == "cli" and details["previous_kid"] == first
    assert run_cli(settings, "rotate-oidc-client-key", "no-such-tenant-slug").returncode == 1
