"""FrontdoorAccounts against the real issuer: list an account's agents, disconnect one, then all.

Agents sign in through Device Sign-In with the approval given straight to the `DeviceStore`
(as in ``tests/integration/signin``); the sdk's HTTP client is the issuer's in-process test
client, over the worker's real PostgreSQL and Redis.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_sdk import AccountsCredentialRefused, AccountsRequestRefused, DisconnectResult, FrontdoorAccounts
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, make_company, new_agent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


@pytest.fixture
async def company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                  clock: ShiftableClock, runtime: Any) -> Company:
    return await make_company(console, issuer, tenant, clock, DeviceStore(runtime.redis, clock=clock))


async def test_list_then_disconnect_one_agent_then_every_agent(company: Company, web: MockWeb) -> None:
    poppy, atlas = new_agent(web), new_agent(web)
    signed = await company.sign_in(poppy, "u1", "acct ada é", scope="poppy:read")
    await company.sign_in(atlas, "u2", "acct ada é")
    await company.sign_in(new_agent(web), "u3", "acct_grace")
    api = FrontdoorAccounts(company.tenant.issuer, company.credential, http=company.issuer)

    agents = await api.connected_agents("acct ada é")
    assert {a.client_id for a in agents} == {poppy.client_id, atlas.client_id}
    listed = {a.client_id: a for a in agents}
    assert listed[poppy.client_id].scopes == ["poppy:read"] and listed[poppy.client_id].sign_ins == 1
    assert agents[0].client_id == atlas.client_id  # most recently signed in first
    assert await api.connected_agents("acct_nobody") == []

    done = await api.disconnect("acct ada é", poppy.client_id)
    assert done == DisconnectResult(account="acct ada é", client_id=poppy.client_id, sign_ins_revoked=1,
                                    tokens_revoked=done.tokens_revoked, sessions_signed_out=1)
    assert done.tokens_revoked >= 1
    assert [a.client_id for a in await api.connected_agents("acct ada é")] == [atlas.client_id]
    assert (await company.introspect(signed["access_token"]))["signed_in"] is False

    everyone = await api.disconnect("acct ada é")
    assert (everyone.client_id, everyone.sign_ins_revoked) == (None, 1)
    assert await api.connected_agents("acct ada é") == []
    assert len(await api.connected_agents("acct_grace")) == 1  # another account is untouched
    again = await api.disconnect("acct ada é")
    assert again.sign_ins_revoked == again.tokens_revoked == again.sessions_signed_out == 0
    # An account ID with "/" cannot be named in the listing's path (documented); disconnect has no path.
    slash = new_agent(web)
    await company.sign_in(slash, "u4", "acct/slash")
    with pytest.raises(AccountsRequestRefused) as refused:
        await api.connected_agents("acct/slash")
    assert refused.value.status == 404
    assert (await api.disconnect("acct/slash", slash.client_id)).sign_ins_revoked == 1


async def test_a_wrong_credential_is_refused(company: Company) -> None:
    api = FrontdoorAccounts(company.tenant.issuer, "fdrs_AAAAAAAA_" + "b" * 43, http=company.issuer)
    with pytest.raises(AccountsCredentialRefused):
        await api.connected_agents("acct_ada")
    with pytest.raises(AccountsCredentialRefused):
        await api.disconnect("acct_ada")
