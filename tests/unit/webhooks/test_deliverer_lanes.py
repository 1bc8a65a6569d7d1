"""The deliverer's shares (`frontdoor_dispatcher.lanes.Lanes`): what an answered attempt still holds."""

from __future__ import annotations

from frontdoor_dispatcher.lanes import Lanes
from frontdoor_webhooks.claims import Candidate


def _claims(n: int, tenant: str = "ten_a", endpoint: str = "ep_a") -> list[Candidate]:
    return [Candidate(tenant_id=tenant, id=f"msg_{tenant}_{endpoint}_{i}", endpoint_id=endpoint) for i in range(n)]


def test_an_answered_attempt_leaves_its_endpoints_share_but_not_its_tenants_or_the_total() -> None:
    lanes = Lanes(total=10, per_tenant=6, per_endpoint=2, per_endpoint_waiting=1)
    assert len(lanes.choose(_claims(5))) == 3  # the endpoint's share: 2 running + 1 waiting
    assert lanes.full_endpoints() == ["ep_a"]
    for _ in range(3):  # every POST answered; their batches not committed yet
        lanes.answered("ep_a")
    assert lanes.full_endpoints() == [] and lanes.held == 3 and lanes.by_tenant["ten_a"] == 3
    assert len(lanes.choose(_claims(5))) == 3  # the endpoint is claimed for again at once
    assert lanes.held == 6 and lanes.full_tenants() == ["ten_a"]  # the tenant's share counts the recording ones
    assert lanes.choose(_claims(5, endpoint="ep_b")) == []  # so its other endpoints wait
    assert lanes.room == 4


def test_release_after_answered_frees_the_tenant_and_the_total_once() -> None:
    lanes = Lanes(total=4, per_tenant=4, per_endpoint=1, per_endpoint_waiting=1)
    lanes.choose(_claims(2))
    lanes.answered("ep_a")
    lanes.release("ten_a", "ep_a", answered=True)  # recorded
    assert lanes.held == 1 and lanes.by_endpoint["ep_a"] == 1 and lanes.by_tenant["ten_a"] == 1
    lanes.release("ten_a", "ep_a")  # never answered (handed back unstarted)
    assert lanes.held == 0 and not lanes.by_endpoint and not lanes.by_tenant
    assert lanes.room == 4


def test_an_endpoints_gate_goes_when_nothing_of_it_is_unanswered_and_a_new_one_is_whole() -> None:
    lanes = Lanes(per_endpoint=2, per_endpoint_waiting=0)
    lanes.choose(_claims(2))
    gate = lanes.gate("ep_a")
    lanes.answered("ep_a")
    lanes.answered("ep_a")  # both answered, still held until recorded
    assert lanes.held == 2 and "ep_a" not in lanes.by_endpoint
    lanes.choose(_claims(1))
    assert lanes.gate("ep_a") is not gate and lanes.gate("ep_a")._value == 2


def test_endpoint_rooms_are_what_each_held_endpoint_may_still_take() -> None:
    lanes = Lanes(per_endpoint=2, per_endpoint_waiting=3)
    lanes.choose(_claims(2) + _claims(5, endpoint="ep_b"))
    assert lanes.endpoint_share == 5
    assert lanes.endpoint_rooms() == {"ep_a": 3, "ep_b": 0}
    lanes.answered("ep_b")
    assert lanes.endpoint_rooms() == {"ep_a": 3, "ep_b": 1}


def test_an_endpoint_that_took_all_its_room_is_claimed_for_again_once_half_its_share_is_free() -> None:
    from collections import Counter

    lanes = Lanes(per_endpoint=2, per_endpoint_waiting=6)  # share 8
    taken = lanes.choose(_claims(8))
    lanes.claimed({}, lanes.endpoint_share, Counter(c.endpoint_id for c in taken))
    assert lanes.backlogged == {"ep_a"} and not lanes.hungry()  # all its room taken: nothing free yet
    for n in range(1, 5):
        lanes.answered("ep_a")
        assert lanes.hungry() is (n >= 4)  # half the share free again: a pass now, not after the pause
    rooms = lanes.endpoint_rooms()
    more = lanes.choose(_claims(2, endpoint="ep_a"))  # fewer due than its room: the backlog is over
    lanes.claimed(rooms, lanes.endpoint_share, Counter(c.endpoint_id for c in more))
    assert lanes.backlogged == set() and not lanes.hungry()


def test_a_backlogged_endpoint_that_is_no_longer_held_is_forgotten_by_the_next_pass() -> None:
    from collections import Counter

    lanes = Lanes(per_endpoint=1, per_endpoint_waiting=1)
    lanes.claimed({}, lanes.endpoint_share, Counter({"ep_a": 2}))
    assert lanes.hungry()  # nothing of it held: all its room is free
    lanes.claimed({}, lanes.endpoint_share, Counter())  # a pass found none of it
    assert lanes.backlogged == set() and not lanes.hungry()


def test_a_pass_with_no_room_for_a_backlogged_endpoint_says_nothing_of_its_backlog() -> None:
    from collections import Counter

    lanes = Lanes(per_endpoint=1, per_endpoint_waiting=1)
    lanes.choose(_claims(2))
    lanes.claimed({}, lanes.endpoint_share, Counter({"ep_a": 2}))
    lanes.claimed(lanes.endpoint_rooms(), lanes.endpoint_share, Counter())  # at its share: left out of the pass
    assert lanes.backlogged == {"ep_a"}
    lanes.answered("ep_a")
    assert lanes.hungry()
