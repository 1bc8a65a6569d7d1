"""The harness driver's Direct Sign-In, end to end with the peer library's own client.

The suite signs in with Device Sign-In whenever a company offers it, so the driver's
``approve_authorization`` (capability ``direct_sign_in``) would otherwise never run here:
this drives it the way the runner does for a company without Device Sign-In. The agent is
the peer library (`DirectSignInClient`: S256 PKCE, state, ``iss`` checked on the redirect,
DPoP and client authentication at the token endpoint); the user acts through the real
pages (Frontdoor's authorization URL, Northwind's login page and the handoff, or with the
``oidc`` login the real OpenID Provider's login and consent pages, then Frontdoor's consent).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from personal_agent_protocol.auth import DirectSignInClient, DirectSignInResult
from personal_agent_protocol.conformance import ConformanceContext
from personal_agent_protocol.sessions import SessionToken

from tests.conformance.harness import FrontdoorDriver, build_context

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module", params=["handoff", "oidc"])
async def context(request: pytest.FixtureRequest) -> AsyncIterator[ConformanceContext]:
    # The apps' lifespans must be entered and exited by one task (see test_suites.py).
    ready: asyncio.Future[ConformanceContext] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def own() -> None:
        try:
            async with build_context(suites=("lifecycle",), login=request.param) as ctx:
                ready.set_result(ctx)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    owner = asyncio.create_task(own())
    try:
        yield await ready
    finally:
        done.set()
        await owner


async def _sign_in(ctx: ConformanceContext, user: str, granted: list[str] | None) -> tuple[SessionToken, DirectSignInResult]:
    metadata = await ctx.metadata()
    assert metadata.authorization_endpoint is not None
    session = await ctx.session(user)
    client = DirectSignInClient(reactor=ctx.agent.reactor, http_client=ctx.http)
    await client.begin(authorization_endpoint=metadata.authorization_endpoint,
                       token_endpoint=metadata.token_endpoint, issuer=metadata.issuer,
                       client_id=ctx.agent.identity.client_id,
                       redirect_uri=str(ctx.agent.identity.metadata["redirect_uris"][0]),
                       scopes=ctx.scenario.scopes, tenant_id=ctx.tenant_id, pairwise_user_id=user,
                       session_id=session.session_id)
    driver = ctx.driver
    assert isinstance(driver, FrontdoorDriver) and "direct_sign_in" in driver.capabilities
    logins = driver.idp_logins
    callback = await driver.approve_authorization(ctx.agent.user_browser.urls[-1],
                                                  account=driver.accounts[0], scopes=granted)
    # With the oidc login the user logged in at the IdP's own pages (the driver takes no other way).
    assert driver.idp_logins == logins + (driver.login == "oidc")
    return session, await client.complete(callback)


async def test_the_driver_completes_direct_sign_in(context: ConformanceContext) -> None:
    session, done = await _sign_in(context, context.new_user(), None)
    assert done.token.signed_in and done.token.session_id == session.session_id
    assert set(done.granted_scopes) == set(context.scenario.scopes)
    assert done.account_token_reference is not None


async def test_the_driver_grants_a_subset(context: ConformanceContext) -> None:
    _, done = await _sign_in(context, context.new_user(), ["orders:read"])
    assert done.granted_scopes == ("orders:read",)
    assert done.missing_scopes == ("poppy:read",)
