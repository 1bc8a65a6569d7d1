"""FrontdoorAccounts against a fake Frontdoor (httpx.MockTransport): requests, answers, errors."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from frontdoor_sdk import (
    AccountsCredentialRefused,
    AccountsRequestRefused,
    AccountsUnavailable,
    ConnectedAgent,
    DisconnectResult,
    FrontdoorAccounts,
    FrontdoorAccountsError,
)

from tests.unit.sdk.kit import CLIENT_ID, CREDENTIAL, ISSUER

AGENT = {"client_id": CLIENT_ID, "client_name": "Poppy <b>", "logo_uri": None, "scope": "orders:read poppy:read",
         "connected_at": "2026-05-01T10:00:00Z", "last_signed_in_at": "2026-05-02T10:00:00Z",
         "last_refreshed_at": "2026-05-03T10:00:00Z", "sign_ins": 2}


def accounts(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[FrontdoorAccounts, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(record))
    return FrontdoorAccounts(ISSUER, CREDENTIAL, http=http), seen


async def test_connected_agents_asks_with_the_credential_and_decodes() -> None:
    api, seen = accounts(lambda r: httpx.Response(200, json={"account": "acct/ada é", "agents": [AGENT]}))
    agents = await api.connected_agents("acct/ada é")
    assert agents == [ConnectedAgent(
        client_id=CLIENT_ID, client_name="Poppy <b>", logo_uri=None, scope="orders:read poppy:read",
        connected_at=datetime(2026, 5, 1, 10, tzinfo=UTC), last_signed_in_at=datetime(2026, 5, 2, 10, tzinfo=UTC),
        last_refreshed_at=datetime(2026, 5, 3, 10, tzinfo=UTC), sign_ins=2)]
    assert agents[0].scopes == ["orders:read", "poppy:read"]
    (request,) = seen
    assert request.method == "GET"
    assert request.url.raw_path.decode() == "/shop-a/accounts/acct%2Fada%20%C3%A9/agents"
    assert request.headers["authorization"] == f"Bearer {CREDENTIAL}"


async def test_no_agents_is_an_empty_list_and_unknown_fields_are_ignored() -> None:
    api, _ = accounts(lambda r: httpx.Response(200, json={"account": "a", "agents": [], "next": None}))
    assert await api.connected_agents("a") == []
    extra = {**AGENT, "new_field": 1}
    api, _ = accounts(lambda r: httpx.Response(200, json={"account": "a", "agents": [extra]}))
    assert (await api.connected_agents("a"))[0].client_id == CLIENT_ID


@pytest.mark.parametrize("client_id", [CLIENT_ID, None])
async def test_disconnect_posts_json_and_decodes_the_summary(client_id: str | None) -> None:
    answer = {"account": "acct_ada", "client_id": client_id, "sign_ins_revoked": 1, "tokens_revoked": 2,
              "sessions_signed_out": 3}
    api, seen = accounts(lambda r: httpx.Response(200, json=answer))
    done = await api.disconnect("acct_ada", client_id)
    assert done == DisconnectResult(account="acct_ada", client_id=client_id, sign_ins_revoked=1, tokens_revoked=2,
                                    sessions_signed_out=3)
    (request,) = seen
    assert (request.method, str(request.url)) == ("POST", f"{ISSUER}/accounts/disconnect")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == f"Bearer {CREDENTIAL}"
    expected = {"account": "acct_ada"} | ({"client_id": client_id} if client_id else {})
    assert json.loads(request.content) == expected


@pytest.mark.parametrize(("status", "error"), [(401, AccountsCredentialRefused), (403, AccountsCredentialRefused),
                                               (500, AccountsUnavailable), (503, AccountsUnavailable),
                                               (429, AccountsUnavailable), (302, AccountsUnavailable)])
async def test_statuses_map_to_typed_errors(status: int, error: type[Exception], caplog: pytest.LogCaptureFixture
                                            ) -> None:
    caplog.set_level(logging.DEBUG)
    api, _ = accounts(lambda r: httpx.Response(status, json={"error": "x"}, headers={"location": "https://x/"}))
    with pytest.raises(error):
        await api.connected_agents("acct_ada")
    with pytest.raises(error) as raised:
        await api.disconnect("acct_ada")
    assert isinstance(raised.value, FrontdoorAccountsError)
    assert CREDENTIAL not in caplog.text and CREDENTIAL not in str(raised.value)


async def test_a_refused_request_carries_the_error_code() -> None:
    api, _ = accounts(lambda r: httpx.Response(400, json={"error": "invalid_request", "error_description": "no"}))
    with pytest.raises(AccountsRequestRefused) as raised:
        await api.disconnect("acct_ada", CLIENT_ID)
    assert (raised.value.status, raised.value.error) == (400, "invalid_request")
    api, _ = accounts(lambda r: httpx.Response(404, text="<html>not found</html>"))
    with pytest.raises(AccountsRequestRefused) as raised:
        await api.connected_agents("acct_ada")
    assert (raised.value.status, raised.value.error) == (404, "refused")


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"agents": [{"client_id": 1}]}', b'{"agents": null}',
                                  b"[" * 10 + b"]" * 10])
async def test_malformed_answers_are_unavailable(body: bytes) -> None:
    api, _ = accounts(lambda r: httpx.Response(200, content=body))
    with pytest.raises(AccountsUnavailable):
        await api.connected_agents("acct_ada")
    with pytest.raises(AccountsUnavailable):
        await api.disconnect("acct_ada")


async def test_an_oversized_answer_is_unavailable() -> None:
    api, _ = accounts(lambda r: httpx.Response(200, content=b'{"agents": []' + b" " * (1024 * 1024) + b"}"))
    with pytest.raises(AccountsUnavailable):
        await api.connected_agents("acct_ada")


async def test_network_failures_are_unavailable_and_never_log_the_credential(caplog: pytest.LogCaptureFixture
                                                                             ) -> None:
    caplog.set_level(logging.DEBUG)

    def fail(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused {request.headers['authorization']}")

    api, _ = accounts(fail)
    with pytest.raises(AccountsUnavailable) as raised:
        await api.connected_agents("acct_ada")
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(AccountsUnavailable):
        await api.disconnect("acct_ada", CLIENT_ID)
    assert CREDENTIAL not in caplog.text and "ConnectError" in caplog.text


@pytest.mark.parametrize("account", ["", " acct", "acct ", "a\x00b", "a" * 256])
async def test_malformed_arguments_are_refused_before_asking(account: str) -> None:
    api, seen = accounts(lambda r: httpx.Response(500))
    with pytest.raises(ValueError):
        await api.connected_agents(account)
    with pytest.raises(ValueError):
        await api.disconnect(account)
    with pytest.raises(ValueError):
        await api.disconnect("acct_ada", client_id=account if len(account) < 256 else "x" * 2049)
    assert seen == []


def test_construction_checks_and_repr_hides_the_credential() -> None:
    with pytest.raises(ValueError):
        FrontdoorAccounts(ISSUER, "")
    with pytest.raises(ValueError):
        FrontdoorAccounts(ISSUER + "/", CREDENTIAL)
    api = FrontdoorAccounts(ISSUER, CREDENTIAL)
    assert CREDENTIAL not in repr(api) and ISSUER in repr(api)


async def test_an_own_client_is_closed_a_given_one_is_not() -> None:
    async with FrontdoorAccounts(ISSUER, CREDENTIAL) as own:
        client = own._http
    assert client.is_closed
    given = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    async with FrontdoorAccounts(ISSUER, CREDENTIAL, http=given):
        pass
    assert not given.is_closed
    await given.aclose()


async def test_a_problem_refusal_is_typed_with_its_code() -> None:
    problem = {"type": "https://frontdoor.dev/problems/invalid_request", "title": "Bad request", "status": 400,
               "code": "invalid_request", "detail": "account must be 1 to 255 characters.", "request_id": "req_1"}
    api, _ = accounts(lambda r: httpx.Response(400, json=problem,
                                                headers={"Content-Type": "application/problem+json"}))
    with pytest.raises(AccountsRequestRefused) as raised:
        await api.connected_agents("acct_ada")
    assert (raised.value.status, raised.value.error) == (400, "invalid_request")
