"""The ledger's DPoP ``jti`` claim and its per-Session counter are one script, so one slot (issue #13 §4).

The agent's operations endpoint sends the proof's claim and the Session's fixed-window count
in one ``ReplayCache.claim_all_then_count``; a Redis Cluster refuses a script whose keys span
slots (CROSSSLOT). Both keys are built here exactly as ``frontdoor_ledger.agent_auth`` builds
them and must carry the tenant's tag; the counter must be the very key ``rate_limit.hit``
counts, so the two paths share one budget (PAP-4.3-18).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from frontdoor_core.rate_limit import window_key
from frontdoor_core.redis_keys import key_slot, shard
from frontdoor_ledger.agent_auth import SessionLimit
from frontdoor_sessions.replay_cache import ReplayCache


class _RecordingRedis:
    """Just enough of redis.asyncio.Redis for ReplayCache: records the script's keys and expiries."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[Any]]] = []

    def register_script(self, _source: str) -> Any:
        async def run(*, keys: list[str], args: list[Any]) -> list[int]:
            self.calls.append((list(keys), list(args)))
            return [1, 1, 42]

        return run


@pytest.mark.parametrize("tenant_id", ["ten_01HZX", "ten_9", "t", "ten_01j9zq8w5x3v7k2m4n6p8r0t2v"])
def test_the_claim_and_the_session_counter_share_the_tenant_slot(tenant_id: str) -> None:
    limit = SessionLimit("ledger:ses", 600)
    counter = window_key(limit.key(tenant_id, "ses_01J0ABC"), limit.window_s, now=1_800_000_030)
    fake = _RecordingRedis()
    fresh, counted = asyncio.run(ReplayCache(fake).claim_all_then_count(  # type: ignore[arg-type]
        [("dpop-ledger", f"{tenant_id}:jkt-thumbprint", "jti-1", 30)], counter))
    assert fresh == [True] and counted == (1, 42)
    ((keys, args),) = fake.calls
    assert keys[1] == f"rl:ledger:ses:{shard(tenant_id)}:ses_01J0ABC:30000000" and args == [30, 30]
    assert {key_slot(k) for k in keys} == {key_slot(shard(tenant_id))}


def test_a_session_id_cannot_move_the_counter_to_another_slot() -> None:
    """The tag comes first: braces in a (verified, but issuer-chosen) ``sid`` do not change the slot."""
    key = SessionLimit("ledger:ses", 600).key("ten_1", "{other}")
    assert key_slot(key) == key_slot("{ten_1}")
