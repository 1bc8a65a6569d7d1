"""``private_key_jwt`` at the company's IdP's token endpoint (RFC 7523, OIDC Core §9).

A real ``oidc-provider`` with a client registered for ``private_key_jwt`` and, as its
keys, what the tenant's ``{issuer}/oidc/jwks.json`` publishes (as the admin would copy
or point it to): a Device Sign-In through it signs in, and the token request carried a
signed client assertion, no secret. The private key is stored KEK-encrypted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from frontdoor_core.settings import Settings
from joserfc import jwt
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.integration.console.test_cli_reencrypt_secrets import fresh  # noqa: F401 (a database of its own)
from tests.integration.signin.conftest import new_agent
from tests.integration.signin.test_oidc_sign_in import SECRET, _clients, staged
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import OpenIdProvider, new_key


@pytest.fixture(scope="module")
def pk_idp() -> Iterator[OpenIdProvider]:
    provider = OpenIdProvider(_clients(), new_key("idp-pk"))
    try:
        yield provider
    finally:
        provider.stop()


async def test_private_key_jwt_at_the_idp(settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock,
                                          runtime: Any, web: MockWeb, pk_idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, pk_idp, client_id="fd-pkjwt",
                      token_endpoint_auth_method="private_key_jwt") as stage:
        r = await stage.issuer.get(f"/{stage.tenant.slug}/oidc/jwks.json")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/jwk-set+json")
        jwks = r.json()
        assert len(jwks["keys"]) == 1 and "d" not in jwks["keys"][0] and jwks["keys"][0]["kty"] == "EC"
        async with runtime.pool.acquire() as conn:
            blob = await conn.fetchval("SELECT key_ciphertext FROM oidc_client_keys WHERE tenant_id = $1",
                                       stage.tenant.id)
        assert blob is not None and jwks["keys"][0]["x"].encode() not in bytes(blob)  # encrypted, not the JWK
        # The admin registers the client at the IdP with Frontdoor's public keys.
        base = _clients()[0]
        pk_idp.clients.append({**{k: v for k, v in base.items() if k != "client_secret"}, "client_id": "fd-pkjwt",
                               "token_endpoint_auth_method": "private_key_jwt", "jwks": jwks})
        pk_idp.restart()

        agent = new_agent(web)
        c = stage.company
        session = await c.session(agent, "alice")
        started, back_url = await stage.device_to_callback(agent, login="ada")
        back = await stage.back(back_url)
        assert back.status_code == 303, back.text
        sent = stage.internet.token_requests[-1]
        assert "authorization" not in sent.headers and SECRET not in sent.content.decode()
        form = dict(pair.split("=", 1) for pair in sent.content.decode().split("&"))
        assert form["client_assertion_type"] == "urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
        claims = jwt.decode(form["client_assertion"], KeySet.import_key_set(jwks)).claims
        assert claims["iss"] == claims["sub"] == "fd-pkjwt" and claims["aud"] == f"{pk_idp.issuer}/token"
        done = await stage.consent(["poppy:read"])
        assert done.status_code == 200, done.text
        clock.advance(seconds=6)
        token = await c.poll(agent, started["device_code"], session["session_id"])
        assert token.status_code == 200, token.text
        assert (await c.introspect(token.json()["access_token"]))["account"] == "ada"


async def test_the_client_jwks_is_only_for_private_key_jwt(settings: Settings, console: AsyncTestClient[Any],
                                                          clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                          pk_idp: OpenIdProvider) -> None:
    async with staged(settings, console, clock, runtime, web, pk_idp) as stage:
        assert (await stage.issuer.get(f"/{stage.tenant.slug}/oidc/jwks.json")).status_code == 404


async def test_kek_rotation_reencrypts_the_client_keys(fresh: Any) -> None:  # noqa: F811
    from datetime import UTC, datetime

    from frontdoor_tenancy import oidc_client_key
    from frontdoor_tenancy.credentials import Kek, generate_kek_value

    old, new = generate_kek_value(), generate_kek_value()
    async with fresh.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ('ten_pk', 'pk-rot', 'PK')")
        now = datetime.now(UTC)
        assert await oidc_client_key.ensure_client_key(conn, Kek.from_env_value(old), "ten_pk", now=now)
    done = await oidc_client_key.reencrypt_oidc_client_keys(fresh.pool, Kek.from_env_value(f"{new},{old}"))
    assert done.reencrypted == 1 and not done.unreadable
    async with fresh.pool.acquire() as conn:
        assert await oidc_client_key.load_client_key(conn, Kek.from_env_value(new), "ten_pk", now=now) is not None
        assert await oidc_client_key.load_client_key(conn, Kek.from_env_value(old), "ten_pk", now=now) is None
