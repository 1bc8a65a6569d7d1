"""DelegatedKeyDirectory: an agent's identity keys under the 1.0 rules (ADR 0004 §6, [S §3]),
over SafeFetcher(transport=httpx.MockTransport) with an injected clock."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from frontdoor_core.clock import FrozenClock
from frontdoor_core.outbound import FetchErrorCode, OutboundPolicy, SafeFetcher
from frontdoor_identity import ClientResolutionError, DelegatedKeyDirectory, ResolutionReason
from test_identity_agent_directory import CLIENT_ID, JWKS_URI, Web, jwks, ok

R = ResolutionReason


@pytest.fixture
def web() -> Web:
    return Web()


@pytest.fixture
def frozen() -> FrozenClock:
    return FrozenClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))


def keys_of(web: Web, frozen: FrozenClock) -> DelegatedKeyDirectory:
    return DelegatedKeyDirectory(SafeFetcher(OutboundPolicy(total_timeout=2.0), transport=httpx.MockTransport(web)),
                                 frozen)


async def refused(directory: DelegatedKeyDirectory, client_id: str = CLIENT_ID) -> ClientResolutionError:
    with pytest.raises(ClientResolutionError) as caught:
        await directory.get_keys(client_id)
    return caught.value


async def test_signed_out_use_needs_only_client_id_and_jwks_uri(web: Web, frozen: FrozenClock) -> None:
    web.serve(CLIENT_ID, ok({"client_id": CLIENT_ID, "jwks_uri": JWKS_URI}))
    web.serve(JWKS_URI, ok(jwks("k1")))
    got = await keys_of(web, frozen).get_keys(CLIENT_ID)
    assert got.client_name is None and [k["kid"] for k in got.public_jwks()] == ["k1"]
    assert all("d" not in k for k in got.public_jwks())


@pytest.mark.parametrize(("doc", "reason"), [
    ({"client_id": CLIENT_ID + "?x", "jwks_uri": JWKS_URI}, R.CLIENT_ID_MISMATCH),
    ({"jwks_uri": JWKS_URI}, R.MISSING_FIELD),
    ({"client_id": CLIENT_ID}, R.MISSING_FIELD),
    ({"client_id": CLIENT_ID, "jwks_uri": "http://agent.example/jwks.json"}, R.JWKS_URI_NOT_HTTPS),
    ({"client_id": CLIENT_ID, "jwks_uri": "https://keys.agent.example/jwks.json"}, R.JWKS_URI_OTHER_DOMAIN),
])
async def test_document_rules(web: Web, frozen: FrozenClock, doc: dict[str, str], reason: R) -> None:
    web.serve(CLIENT_ID, ok(doc))
    web.serve(JWKS_URI, ok(jwks("k1")))
    assert (await refused(keys_of(web, frozen))).reason == reason


async def test_no_redirect_for_the_document_or_the_jwks(web: Web, frozen: FrozenClock) -> None:
    """The 1.0 rules accept no redirect, even to the same host (0.2 tolerates a same-host JWKS one)."""
    moved = "https://agent.example/moved.json"
    web.serve(CLIENT_ID, httpx.Response(302, headers={"location": moved}))
    web.serve(moved, ok({"client_id": CLIENT_ID, "jwks_uri": JWKS_URI}))
    assert (await refused(keys_of(web, frozen))).reason == R.CLIENT_ID_REDIRECTED
    web2 = Web()
    web2.serve(CLIENT_ID, ok({"client_id": CLIENT_ID, "jwks_uri": JWKS_URI}))
    web2.serve(JWKS_URI, httpx.Response(302, headers={"location": "https://agent.example/k2.json"}))
    web2.serve("https://agent.example/k2.json", ok(jwks("k1")))
    assert (await refused(keys_of(web2, frozen))).reason == R.JWKS_URI_OTHER_DOMAIN


async def test_a_failed_load_is_cached_30_seconds(web: Web, frozen: FrozenClock) -> None:
    directory = keys_of(web, frozen)
    assert (await refused(directory)).reason == FetchErrorCode.BAD_STATUS
    frozen.advance(seconds=29)
    await refused(directory)
    assert web.hits[CLIENT_ID] == 1
    frozen.advance(seconds=2)
    web.agent(CLIENT_ID, "k1")
    assert (await directory.get_keys(CLIENT_ID)).client_name == "Example Agent"
    assert web.hits[CLIENT_ID] == 2


async def test_unknown_kid_reloads_at_most_once_per_30_seconds(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "k1", metadata="max-age=3600", jwks="max-age=3600")
    directory = keys_of(web, frozen)
    await directory.get_keys(CLIENT_ID)
    web.serve(JWKS_URI, ok(jwks("k2")))
    got = await directory.get_keys(CLIENT_ID, refresh=True)
    assert [k.kid for k in got.keys.keys] == ["k2"] and web.hits[JWKS_URI] == 2
    frozen.advance(seconds=29)
    web.serve(JWKS_URI, ok(jwks("k3")))
    again = await directory.get_keys(CLIENT_ID, refresh=True)
    assert [k.kid for k in again.keys.keys] == ["k2"] and web.hits[JWKS_URI] == 2
    frozen.advance(seconds=2)
    latest = await directory.get_keys(CLIENT_ID, refresh=True)
    assert [k.kid for k in latest.keys.keys] == ["k3"] and web.hits[JWKS_URI] == 3


async def test_loaded_keys_are_kept_up_to_an_hour_while_reloads_fail(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "k1", metadata="max-age=300", jwks="max-age=300")
    directory = keys_of(web, frozen)
    loaded = await directory.get_keys(CLIENT_ID)
    web.serve(CLIENT_ID, httpx.Response(503, headers={"content-type": "application/json"}, content=b"{}"))
    frozen.advance(seconds=301)
    assert await directory.get_keys(CLIENT_ID) is loaded  # reload failed: the keys stay
    frozen.advance(seconds=10)
    assert await directory.get_keys(CLIENT_ID) is loaded
    frozen.advance(seconds=3600 - 311 + 1)  # past an hour after they loaded
    assert (await refused(directory)).reason == FetchErrorCode.BAD_STATUS


async def test_client_id_must_be_an_https_url(web: Web, frozen: FrozenClock) -> None:
    assert (await refused(keys_of(web, frozen), "http://agent.example/a.json")).reason == R.INVALID_CLIENT_ID
    assert web.hits == {}
