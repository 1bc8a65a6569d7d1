"""AgentDirectory over SafeFetcher(transport=httpx.MockTransport): fetch, validate, cache (PAP §4.1)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from frontdoor_core.clock import FrozenClock
from frontdoor_core.outbound import FetchErrorCode, OutboundPolicy, SafeFetcher
from frontdoor_identity import (
    AgentDirectory,
    CacheBounds,
    ClientResolutionError,
    InvalidClientMetadata,
    ResolutionReason,
)
from joserfc.jwk import ECKey

CLIENT_ID = "https://agent.example/agent.json"
JWKS_URI = "https://agent.example/jwks.json"
JSON = "application/json"
R = ResolutionReason

Answer = httpx.Response | Callable[[httpx.Request], Awaitable[httpx.Response]]


def metadata(client_id: str = CLIENT_ID, **changes: Any) -> dict[str, Any]:
    host = client_id.split("/")[2]
    doc = {
        "client_id": client_id,
        "client_name": "Example Agent",
        "jwks_uri": f"https://{host}/jwks.json",
        "redirect_uris": [f"https://{host}/cb"],
    }
    doc.update(changes)
    return doc


def jwks(*kids: str) -> dict[str, Any]:
    return {"keys": [ECKey.generate_key("P-256").as_dict(private=False) | {"kid": kid} for kid in kids]}


def ok(body: object, *, cache_control: str | None = None, content_type: str = JSON) -> httpx.Response:
    headers = {"content-type": content_type}
    if cache_control is not None:
        headers["cache-control"] = cache_control
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.Response(200, headers=headers, content=content)


class Web:
    """The internet as the fetcher sees it: URL -> answer, with a count of every request."""

    def __init__(self) -> None:
        self.routes: dict[str, Answer] = {}
        self.hits: Counter[str] = Counter()
        self.requests: list[httpx.Request] = []

    def serve(self, url: str, answer: Answer) -> None:
        self.routes[url] = answer

    def agent(self, client_id: str = CLIENT_ID, *kids: str, **cache: str) -> None:
        doc = metadata(client_id)
        self.serve(client_id, ok(doc, cache_control=cache.get("metadata")))
        self.serve(doc["jwks_uri"], ok(jwks(*(kids or ("k1",))), cache_control=cache.get("jwks")))

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.hits[url] += 1
        self.requests.append(request)
        answer = self.routes.get(url)
        if answer is None:
            return httpx.Response(404, headers={"content-type": JSON}, content=b"{}")
        if isinstance(answer, httpx.Response):
            return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)
        return await answer(request)


@pytest.fixture
def web() -> Web:
    return Web()


@pytest.fixture
def frozen() -> FrozenClock:
    return FrozenClock(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))


def directory(web: Web, frozen: FrozenClock, **bounds: Any) -> AgentDirectory:
    fetcher = SafeFetcher(OutboundPolicy(total_timeout=2.0), transport=httpx.MockTransport(web))
    return AgentDirectory(fetcher, frozen, bounds=CacheBounds(**bounds))


async def refused(call: Awaitable[object]) -> ClientResolutionError:
    with pytest.raises(ClientResolutionError) as caught:
        await call
    return caught.value


async def test_resolves_metadata_and_keys_without_sending_credentials(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "k1", "k2")

    client = await directory(web, frozen).get_client(CLIENT_ID)

    assert client.metadata.client_name == "Example Agent"
    assert sorted(k.kid or "" for k in client.keys.keys) == ["k1", "k2"]
    assert client.expires_at == frozen.now.replace(minute=5)  # default 5 min without headers
    assert [str(r.url) for r in web.requests] == [CLIENT_ID, JWKS_URI]
    for request in web.requests:  # GUIDE-fetch-02
        assert not {"cookie", "authorization", "dpop"} & set(request.headers.keys())


async def test_a_second_get_is_a_cache_hit(web: Web, frozen: FrozenClock) -> None:
    web.agent()
    agents = directory(web, frozen)
    first = await agents.get_client(CLIENT_ID)
    frozen.advance(seconds=299)

    assert await agents.get_client(CLIENT_ID) is first
    assert web.hits == {CLIENT_ID: 1, JWKS_URI: 1}


async def test_guide_fetch_04_expiry_follows_the_shorter_cache_lifetime(web: Web, frozen: FrozenClock) -> None:
    web.agent(metadata="max-age=3600", jwks="max-age=120")
    agents = directory(web, frozen)
    await agents.get_client(CLIENT_ID)

    frozen.advance(seconds=119)
    await agents.get_client(CLIENT_ID)
    assert web.hits == {CLIENT_ID: 1, JWKS_URI: 1}
    frozen.advance(seconds=2)
    await agents.get_client(CLIENT_ID)
    assert web.hits == {CLIENT_ID: 2, JWKS_URI: 2}


async def test_guide_fetch_04_no_store_is_still_cached_for_the_minimum(web: Web, frozen: FrozenClock) -> None:
    web.agent(metadata="no-store", jwks="no-store")
    agents = directory(web, frozen)
    await agents.get_client(CLIENT_ID)
    frozen.advance(seconds=59)
    await agents.get_client(CLIENT_ID)
    assert web.hits[CLIENT_ID] == 1
    frozen.advance(seconds=1)
    await agents.get_client(CLIENT_ID)
    assert web.hits[CLIENT_ID] == 2


async def test_a_failure_is_remembered_for_a_minute(web: Web, frozen: FrozenClock) -> None:
    web.serve(CLIENT_ID, httpx.Response(503, headers={"content-type": JSON}, content=b"{}"))
    agents = directory(web, frozen)

    first = await refused(agents.get_client(CLIENT_ID))
    frozen.advance(seconds=59)
    again = await refused(agents.get_client(CLIENT_ID))

    assert (first.reason, first.stage) == (FetchErrorCode.BAD_STATUS, "client_metadata")
    assert again.reason is FetchErrorCode.BAD_STATUS and again is not first
    assert web.hits[CLIENT_ID] == 1
    web.agent()
    frozen.advance(seconds=1)
    assert (await agents.get_client(CLIENT_ID)).metadata.client_id == CLIENT_ID
    assert web.hits[CLIENT_ID] == 2


async def test_an_invalid_document_is_negatively_cached_too(web: Web, frozen: FrozenClock) -> None:
    web.serve(CLIENT_ID, ok(metadata(client_id="https://agent.example/other.json")))
    agents = directory(web, frozen)
    for _ in range(3):
        error = await refused(agents.get_client(CLIENT_ID))
        assert isinstance(error, InvalidClientMetadata)
        assert (error.reason, error.requirement) == (R.CLIENT_ID_MISMATCH, "PAP-4.1-02")
    assert web.hits[CLIENT_ID] == 1


async def test_guide_keys_02_unknown_kid_refetch_at_most_every_30_s(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "old")
    agents = directory(web, frozen)
    await agents.get_client(CLIENT_ID)
    web.serve(JWKS_URI, ok(jwks("old", "new")))

    keys = await agents.refresh_keys(CLIENT_ID)
    assert keys is not None and keys.get_by_kid("new")
    assert (await agents.get_client(CLIENT_ID)).keys is keys  # the cache holds the new set
    frozen.advance(seconds=29)
    assert await agents.refresh_keys(CLIENT_ID) is None
    assert web.hits[JWKS_URI] == 2
    frozen.advance(seconds=1)
    assert await agents.refresh_keys(CLIENT_ID) is not None
    assert web.hits == {CLIENT_ID: 1, JWKS_URI: 3}


async def test_guide_keys_02_failed_refetches_count_and_keep_the_old_keys(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "old")
    agents = directory(web, frozen)
    before = await agents.get_client(CLIENT_ID)
    web.serve(JWKS_URI, ok(b"<html>", content_type="text/html"))

    error = await refused(agents.refresh_keys(CLIENT_ID))
    assert (error.reason, error.stage) == (FetchErrorCode.NOT_JSON, "jwks")
    assert await agents.refresh_keys(CLIENT_ID) is None
    assert web.hits[JWKS_URI] == 2
    assert await agents.get_client(CLIENT_ID) is before


async def test_refresh_of_an_uncached_client_resolves_it(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "k1")
    keys = await directory(web, frozen).refresh_keys(CLIENT_ID)
    assert keys is not None and keys.get_by_kid("k1")
    assert web.hits == {CLIENT_ID: 1, JWKS_URI: 1}


async def test_concurrent_gets_share_one_fetch(web: Web, frozen: FrozenClock) -> None:
    release = asyncio.Event()
    document = ok(metadata())

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, headers=document.headers, content=document.content)

    web.agent()
    web.serve(CLIENT_ID, slow)
    agents = directory(web, frozen)
    waiting = [asyncio.create_task(agents.get_client(CLIENT_ID)) for _ in range(25)]
    await asyncio.sleep(0.05)
    release.set()
    clients = await asyncio.gather(*waiting)

    assert all(c is clients[0] for c in clients)
    assert web.hits == {CLIENT_ID: 1, JWKS_URI: 1}


async def test_concurrent_failures_share_one_fetch_and_raise_their_own_error(web: Web, frozen: FrozenClock) -> None:
    release = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(500)

    web.serve(CLIENT_ID, slow)
    agents = directory(web, frozen)
    waiting = [asyncio.create_task(agents.get_client(CLIENT_ID)) for _ in range(10)]
    await asyncio.sleep(0.05)
    release.set()
    errors = await asyncio.gather(*waiting, return_exceptions=True)

    assert all(isinstance(e, ClientResolutionError) and e.reason is FetchErrorCode.BAD_STATUS for e in errors)
    assert len({id(e) for e in errors}) == 10
    assert web.hits[CLIENT_ID] == 1


async def test_concurrent_unknown_kid_refreshes_share_one_fetch(web: Web, frozen: FrozenClock) -> None:
    web.agent(CLIENT_ID, "old")
    agents = directory(web, frozen)
    await agents.get_client(CLIENT_ID)
    release = asyncio.Event()
    fresh = ok(jwks("old", "new"))

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, headers=fresh.headers, content=fresh.content)

    web.serve(JWKS_URI, slow)
    waiting = [asyncio.create_task(agents.refresh_keys(CLIENT_ID)) for _ in range(10)]
    await asyncio.sleep(0.05)
    release.set()
    sets = await asyncio.gather(*waiting)

    assert all(s is not None and s is sets[0] for s in sets)
    assert web.hits[JWKS_URI] == 2


async def test_a_cancelled_caller_does_not_cancel_the_shared_fetch(web: Web, frozen: FrozenClock) -> None:
    release = asyncio.Event()
    document = ok(metadata())

    async def slow(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, headers=document.headers, content=document.content)

    web.agent()
    web.serve(CLIENT_ID, slow)
    agents = directory(web, frozen)
    impatient = asyncio.create_task(agents.get_client(CLIENT_ID))
    patient = asyncio.create_task(agents.get_client(CLIENT_ID))
    await asyncio.sleep(0.05)
    impatient.cancel()
    release.set()

    assert (await patient).metadata.client_id == CLIENT_ID
    assert impatient.cancelled()
    await agents.get_client(CLIENT_ID)
    assert web.hits[CLIENT_ID] == 1


@pytest.mark.parametrize("url", [CLIENT_ID, JWKS_URI])
async def test_guide_json_01_duplicate_members_are_refused(web: Web, frozen: FrozenClock, url: str) -> None:
    web.agent()
    body = json.dumps(metadata()) if url == CLIENT_ID else json.dumps(jwks("k1"))
    web.serve(url, ok(body[:-1].encode() + b', "client_name": "Evil"}' if url == CLIENT_ID else
                      body[:-1].encode() + b', "keys": []}'))

    error = await refused(directory(web, frozen).get_client(CLIENT_ID))

    assert (error.reason, error.requirement) == (R.DUPLICATE_MEMBER, "GUIDE-json-01")
    assert error.stage == ("client_metadata" if url == CLIENT_ID else "jwks")


async def test_a_nested_duplicate_member_is_refused(web: Web, frozen: FrozenClock) -> None:
    web.agent()
    web.serve(CLIENT_ID, ok(json.dumps(metadata())[:-1].encode() + b', "extensions": {"a": {"version": "1", "version": "2"}}}'))
    assert (await refused(directory(web, frozen).get_client(CLIENT_ID))).reason is R.DUPLICATE_MEMBER


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (ok(b"<html></html>", content_type="text/html"), FetchErrorCode.NOT_JSON),
        (ok(json.dumps(metadata()).encode(), content_type="text/plain"), FetchErrorCode.NOT_JSON),
        (ok(b"<html></html>"), R.MALFORMED_JSON),
        (ok(b'{"client_id": NaN}'), R.MALFORMED_JSON),
        (ok(b"\xff\xfe{}"), R.MALFORMED_JSON),
        (ok(b"[]"), R.NOT_OBJECT),
        (ok(b"x" * 100_001), FetchErrorCode.TOO_LARGE),
    ],
)
async def test_non_json_and_oversized_documents_are_refused(
    web: Web, frozen: FrozenClock, response: httpx.Response, reason: object
) -> None:
    web.serve(CLIENT_ID, response)
    error = await refused(directory(web, frozen).get_client(CLIENT_ID))
    assert (error.reason, error.stage) == (reason, "client_metadata")
    assert web.hits[JWKS_URI] == 0


async def test_pap_4_1_03_jwks_on_another_domain_is_refused_before_fetching_it(web: Web, frozen: FrozenClock) -> None:
    web.serve(CLIENT_ID, ok(metadata(jwks_uri="https://keys.example/jwks.json")))
    web.serve("https://keys.example/jwks.json", ok(jwks("k1")))

    error = await refused(directory(web, frozen).get_client(CLIENT_ID))

    assert (error.reason, error.requirement) == (R.JWKS_URI_OTHER_DOMAIN, "PAP-4.1-03")
    assert web.hits == {CLIENT_ID: 1}


async def test_pap_4_1_03_a_jwks_redirect_may_not_leave_the_client_host(web: Web, frozen: FrozenClock) -> None:
    web.agent()
    web.serve(JWKS_URI, httpx.Response(302, headers={"location": "https://keys.example/jwks.json"}))
    web.serve("https://keys.example/jwks.json", ok(jwks("k1")))
    error = await refused(directory(web, frozen).get_client(CLIENT_ID))
    assert (error.reason, error.stage) == (R.JWKS_URI_OTHER_DOMAIN, "jwks")

    web.serve(JWKS_URI, httpx.Response(302, headers={"location": "/keys/v2.json"}))
    web.serve("https://agent.example/keys/v2.json", ok(jwks("k2")))
    frozen.advance(seconds=60)
    assert (await directory(web, frozen).get_client(CLIENT_ID)).keys.get_by_kid("k2")


async def test_pap_4_1_02_the_metadata_document_is_not_taken_from_a_redirect(web: Web, frozen: FrozenClock) -> None:
    moved = "https://agent.example/v2/agent.json"
    web.serve(CLIENT_ID, httpx.Response(301, headers={"location": moved}))
    web.serve(moved, ok(metadata()))

    error = await refused(directory(web, frozen).get_client(CLIENT_ID))

    assert (error.reason, error.requirement) == (R.CLIENT_ID_REDIRECTED, "PAP-4.1-02")
    assert web.hits[JWKS_URI] == 0


@pytest.mark.parametrize(
    "client_id",
    ["http://agent.example/agent.json", "agent.example", "https://agent.example/a.json#x", "https://u:p@a.example/"],
)
async def test_an_unusable_client_id_is_refused_without_a_request(web: Web, frozen: FrozenClock, client_id: str) -> None:
    agents = directory(web, frozen)
    error = await refused(agents.get_client(client_id))
    assert (error.reason, error.stage) == (R.INVALID_CLIENT_ID, "client_id")
    assert (await refused(agents.refresh_keys(client_id))).reason is R.INVALID_CLIENT_ID
    assert not web.requests


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "[::1]", "[::ffff:127.0.0.1]"])
async def test_pap_3_10_ip_literal_client_ids_on_private_addresses_are_refused(
    web: Web, frozen: FrozenClock, host: str
) -> None:
    error = await refused(directory(web, frozen).get_client(f"https://{host}/agent.json"))
    assert (error.reason, error.stage) == (FetchErrorCode.BLOCKED_ADDRESS, "client_metadata")
    assert not web.requests


async def test_the_cache_is_bounded_least_recently_used_first(web: Web, frozen: FrozenClock) -> None:
    ids = [f"https://agent{i}.example/agent.json" for i in range(3)]
    for client_id in ids:
        web.agent(client_id)
    agents = directory(web, frozen, max_clients=2)
    await agents.get_client(ids[0])
    await agents.get_client(ids[1])
    await agents.get_client(ids[0])  # now ids[1] is the least recently used
    await agents.get_client(ids[2])

    await agents.get_client(ids[0])
    assert web.hits[ids[0]] == 1
    await agents.get_client(ids[1])
    assert web.hits[ids[1]] == 2
