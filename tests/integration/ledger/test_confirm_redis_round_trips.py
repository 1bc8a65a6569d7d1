"""How many Redis round trips one agent confirm costs (issue #13 §4), pinned so a regression shows.

Counted at the socket: every write of a command (or of a pipeline's commands together) to
Redis by any client of this process while the confirm is served, health-check ``PING``s
left out. A confirm that is performed and answered with its outcome sends three: the
per-network limit (before any lookup, so it stays its own script), the DPoP proof's ``jti``
claim with the per-Session count (one script on the tenant's slot, RFC 9449 §11.1,
PAP-4.3-18), and the settled outcome's ``PUBLISH``. The outcome itself is heard on the
listener's standing subscription, not by a command of the confirm.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from frontdoor_core.rate_limit import window_key
from frontdoor_core.redis_keys import shard
from redis.asyncio.connection import AbstractConnection

from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed, signed_in
from tests.support.agent import TestAgent
from tests.support.fixed_windows import room_in_window


def _names(command: Any) -> list[str]:
    """The command names in one packed write (RESP arrays of bulk strings, as redis-py packs them)."""
    if isinstance(command, str):
        command = command.encode()
    raw = command if isinstance(command, bytes) else b"".join(bytes(c) for c in command)
    names: list[str] = []
    at = 0
    while at < len(raw):
        assert raw[at:at + 1] == b"*", raw[at:at + 20]
        end = raw.index(b"\r\n", at)
        args, at = int(raw[at + 1:end]), end + 2
        for i in range(args):
            end = raw.index(b"\r\n", at)
            size, at = int(raw[at + 1:end]), end + 2
            if i == 0:
                names.append(raw[at:at + size].decode().upper())
            at += size + 2
    return names


@contextlib.contextmanager
def round_trips() -> Iterator[list[list[str]]]:
    """Every packed write to Redis meanwhile, as the command names it carried."""
    sent: list[list[str]] = []
    original = AbstractConnection.send_packed_command

    async def send(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        names = _names(command)
        if names != ["PING"]:
            sent.append(names)
        await original(self, command, check_health)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(AbstractConnection, "send_packed_command", send)
        yield sent


async def test_a_performed_confirm_costs_three_redis_round_trips(shop: Shop, agent: TestAgent) -> None:
    # A first confirm loads the scripts into Redis (EVALSHA then SCRIPT LOAD on a cold server).
    _, tokens, warm = await proposed(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], warm)).json()["state"] == "succeeded"
    _, tokens, op = await proposed(shop, agent)
    with round_trips() as sent:
        r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    assert sent == [["EVALSHA"], ["EVALSHA"], ["PUBLISH"]], sent


async def test_a_replay_is_refused_in_the_claims_round_trip_and_not_counted(shop: Shop, agent: TestAgent,
                                                                           runtime: Any) -> None:
    """RFC 9449 §11.1, PAP-4.3-18: the claim's script refuses a replayed proof and counts it nowhere.

    The Session's counter is the one ``rate_limit.hit`` keeps (``ledger:ses``, tagged by the
    tenant): one request, one count; three replays, none.
    """
    _, tokens = await signed_in(shop, agent)
    url = shop.url("op_unknown")
    token = tokens["access_token"]
    await room_in_window(60, needed_s=15)  # the counter is per wall-clock minute: the requests and the read in one
    headers = {"Authorization": f"DPoP {token}", "DPoP": agent.dpop("GET", url, token=token, iat=shop.now())}
    first = await shop.ledger.get(url, headers=headers)
    with round_trips() as sent:
        replays = [await shop.ledger.get(url, headers=headers) for _ in range(3)]
    counter, _ = window_key(f"ledger:ses:{shard(shop.tenant.id)}:{tokens['session_id']}", 60)
    counted = await runtime.redis.get(counter)
    assert first.status_code == 404 and first.json()["error"] == "operation_not_found", first.text
    for replay in replays:
        assert replay.status_code == 401 and replay.json()["error"] == "invalid_dpop_proof", replay.text
    assert sent == [["EVALSHA"], ["EVALSHA"]] * 3, sent  # the network's count, the claim (with the Session's)
    assert counted is not None and int(counted) == 1
