"""The claim lifecycle: every transition, the error rules and the schedule, on fixed datetimes."""

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_tenancy.domains import (
    ClaimFacts,
    Decision,
    DomainEvent,
    DomainStatus,
    LifecyclePolicy,
    Observation,
    evaluate_check,
    is_listed,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
POLICY = LifecyclePolicy()
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)

PENDING = DomainStatus.PENDING
VERIFIED = DomainStatus.VERIFIED
SUSPENDED = DomainStatus.SUSPENDED
FAILED = DomainStatus.FAILED
PRESENT = Observation.PRESENT
ABSENT = Observation.ABSENT
UNKNOWN = Observation.UNKNOWN


def pending(last_checked_at: datetime | None = None) -> ClaimFacts:
    return ClaimFacts(status=PENDING, created_at=T0, last_checked_at=last_checked_at)


def verified(missing_since: datetime | None = None) -> ClaimFacts:
    return ClaimFacts(
        status=VERIFIED,
        created_at=T0,
        verified_at=T0 + HOUR,
        last_seen_at=T0 + 10 * DAY,
        missing_since=missing_since,
        last_checked_at=T0 + 10 * DAY,
    )


def suspended() -> ClaimFacts:
    return ClaimFacts(
        status=SUSPENDED,
        created_at=T0,
        verified_at=T0 + HOUR,
        last_seen_at=T0 + 10 * DAY,
        missing_since=T0 + 11 * DAY,
        last_checked_at=T0 + 14 * DAY,
    )


def failed() -> ClaimFacts:
    return ClaimFacts(status=FAILED, created_at=T0, last_checked_at=T0 + 7 * DAY)


# --- pending -------------------------------------------------------------------------------


def test_pending_present_verifies() -> None:
    now = T0 + 5 * MINUTE
    decision = evaluate_check(pending(), PRESENT, now, POLICY)
    assert decision == Decision(
        new_status=VERIFIED,
        verified_at=now,
        last_seen_at=now,
        missing_since=None,
        last_checked_at=now,
        next_check_at=now + DAY,
        event=DomainEvent.VERIFIED,
    )


def test_pending_present_after_the_window_still_verifies() -> None:
    now = T0 + 8 * DAY
    decision = evaluate_check(pending(), PRESENT, now, POLICY)
    assert decision.new_status is VERIFIED
    assert decision.event is DomainEvent.VERIFIED


def test_young_pending_absent_stays_pending_and_rechecks_soon() -> None:
    now = T0 + 5 * MINUTE
    decision = evaluate_check(pending(), ABSENT, now, POLICY)
    assert decision == Decision(
        new_status=PENDING,
        verified_at=None,
        last_seen_at=None,
        missing_since=None,
        last_checked_at=now,
        next_check_at=now + POLICY.pending_recheck_interval,
        event=None,
    )


@pytest.mark.parametrize(
    ("age", "interval"),
    [
        (timedelta(0), 15 * MINUTE),
        (HOUR, 15 * MINUTE),
        (4 * HOUR, HOUR),
        (12 * HOUR, 3 * HOUR),
        (DAY, 6 * HOUR),
        (3 * DAY, 6 * HOUR),
    ],
)
def test_pending_recheck_backs_off_with_age(age: timedelta, interval: timedelta) -> None:
    decision = evaluate_check(pending(), ABSENT, T0 + age, POLICY)
    assert decision.next_check_at == T0 + age + interval


def test_pending_recheck_never_passes_the_deadline() -> None:
    now = T0 + 7 * DAY - HOUR
    decision = evaluate_check(pending(), ABSENT, now, POLICY)
    assert decision.new_status is PENDING
    assert decision.next_check_at == T0 + POLICY.pending_window


@pytest.mark.parametrize("age", [7 * DAY, 7 * DAY + MINUTE, 30 * DAY])
def test_pending_absent_at_or_after_the_window_fails(age: timedelta) -> None:
    now = T0 + age
    decision = evaluate_check(pending(last_checked_at=now - HOUR), ABSENT, now, POLICY)
    assert decision == Decision(
        new_status=FAILED,
        verified_at=None,
        last_seen_at=None,
        missing_since=None,
        last_checked_at=now,
        next_check_at=None,
        event=DomainEvent.FAILED,
    )


def test_pending_absent_just_before_the_window_does_not_fail() -> None:
    decision = evaluate_check(pending(), ABSENT, T0 + 7 * DAY - timedelta(seconds=1), POLICY)
    assert decision.new_status is PENDING
    assert decision.event is None


def test_pending_unknown_after_the_window_does_not_fail() -> None:
    now = T0 + 9 * DAY
    decision = evaluate_check(pending(), UNKNOWN, now, POLICY)
    assert decision.new_status is PENDING
    assert decision.event is None
    assert decision.next_check_at == now + POLICY.error_retry_interval


def test_scheduled_pending_claim_is_checked_about_forty_times_then_fails_on_time() -> None:
    facts = pending()
    now = T0
    checks = 0
    gaps: list[timedelta] = []
    while True:
        decision = evaluate_check(facts, ABSENT, now, POLICY)
        checks += 1
        if decision.new_status is FAILED:
            break
        assert decision.next_check_at is not None
        gaps.append(decision.next_check_at - now)
        now = decision.next_check_at
        facts = ClaimFacts(status=decision.new_status, created_at=T0, last_checked_at=now)
    assert now == T0 + POLICY.pending_window
    assert decision.event is DomainEvent.FAILED
    assert 30 <= checks <= 50
    assert gaps[:4] == [15 * MINUTE] * 4
    assert max(gaps) == POLICY.pending_recheck_max_interval
    assert gaps[:-1] == sorted(gaps[:-1])  # only the last gap is cut short by the deadline


# --- verified ------------------------------------------------------------------------------


def test_verified_present_keeps_verified_at_and_reschedules_daily() -> None:
    now = T0 + 11 * DAY
    decision = evaluate_check(verified(), PRESENT, now, POLICY)
    assert decision == Decision(
        new_status=VERIFIED,
        verified_at=T0 + HOUR,
        last_seen_at=now,
        missing_since=None,
        last_checked_at=now,
        next_check_at=now + DAY,
        event=None,
    )


def test_verified_present_clears_missing_since() -> None:
    now = T0 + 12 * DAY
    decision = evaluate_check(verified(missing_since=now - 2 * DAY), PRESENT, now, POLICY)
    assert decision.new_status is VERIFIED
    assert decision.missing_since is None
    assert decision.last_seen_at == now
    assert decision.event is None


def test_verified_first_miss_records_missing_but_stays_listed() -> None:
    now = T0 + 11 * DAY
    decision = evaluate_check(verified(), ABSENT, now, POLICY)
    assert decision == Decision(
        new_status=VERIFIED,
        verified_at=T0 + HOUR,
        last_seen_at=T0 + 10 * DAY,
        missing_since=now,
        last_checked_at=now,
        next_check_at=now + DAY,
        event=DomainEvent.RECORD_MISSING,
    )
    assert is_listed(decision.new_status)


def test_verified_miss_within_grace_keeps_first_miss_and_schedules_the_grace_deadline() -> None:
    missing_since = T0 + 11 * DAY
    now = missing_since + 60 * HOUR
    decision = evaluate_check(verified(missing_since), ABSENT, now, POLICY)
    assert decision.new_status is VERIFIED
    assert decision.missing_since == missing_since
    assert decision.event is None
    assert decision.next_check_at == missing_since + POLICY.grace_period


def test_verified_miss_just_inside_grace_does_not_suspend() -> None:
    missing_since = T0 + 11 * DAY
    decision = evaluate_check(verified(missing_since), ABSENT, missing_since + 72 * HOUR - MINUTE, POLICY)
    assert decision.new_status is VERIFIED


@pytest.mark.parametrize("missing_for", [72 * HOUR, 72 * HOUR + MINUTE, 30 * DAY])
def test_verified_miss_past_grace_suspends(missing_for: timedelta) -> None:
    missing_since = T0 + 11 * DAY
    now = missing_since + missing_for
    decision = evaluate_check(verified(missing_since), ABSENT, now, POLICY)
    assert decision == Decision(
        new_status=SUSPENDED,
        verified_at=T0 + HOUR,
        last_seen_at=T0 + 10 * DAY,
        missing_since=missing_since,
        last_checked_at=now,
        next_check_at=now + POLICY.suspended_recheck_interval,
        event=DomainEvent.SUSPENDED,
    )
    assert not is_listed(decision.new_status)


def test_zero_grace_suspends_on_the_first_miss() -> None:
    policy = LifecyclePolicy(grace_period=timedelta(0))
    now = T0 + 11 * DAY
    decision = evaluate_check(verified(), ABSENT, now, policy)
    assert decision.new_status is SUSPENDED
    assert decision.missing_since == now
    assert decision.event is DomainEvent.SUSPENDED


def test_verified_unknown_past_grace_never_suspends() -> None:
    missing_since = T0 + 11 * DAY
    now = missing_since + 10 * DAY
    decision = evaluate_check(verified(missing_since), UNKNOWN, now, POLICY)
    assert decision.new_status is VERIFIED
    assert decision.missing_since == missing_since
    assert decision.event is None
    assert decision.next_check_at == now + POLICY.error_retry_interval


# --- suspended -----------------------------------------------------------------------------


def test_suspended_present_reverifies() -> None:
    now = T0 + 20 * DAY
    decision = evaluate_check(suspended(), PRESENT, now, POLICY)
    assert decision == Decision(
        new_status=VERIFIED,
        verified_at=now,
        last_seen_at=now,
        missing_since=None,
        last_checked_at=now,
        next_check_at=now + DAY,
        event=DomainEvent.REVERIFIED,
    )


@pytest.mark.parametrize("manual", [False, True])
def test_suspended_absent_stays_suspended(manual: bool) -> None:
    now = T0 + 20 * DAY
    decision = evaluate_check(suspended(), ABSENT, now, POLICY, manual=manual)
    assert decision.new_status is SUSPENDED
    assert decision.missing_since == T0 + 11 * DAY
    assert decision.event is None
    assert decision.next_check_at == now + POLICY.suspended_recheck_interval


# --- failed --------------------------------------------------------------------------------


@pytest.mark.parametrize("observation", list(Observation))
def test_failed_is_terminal_for_scheduled_checks(observation: Observation) -> None:
    now = T0 + 8 * DAY
    decision = evaluate_check(failed(), observation, now, POLICY)
    assert decision.new_status is FAILED
    assert decision.next_check_at is None
    assert decision.event is None


def test_manual_check_that_sees_the_record_verifies_a_failed_claim() -> None:
    now = T0 + 8 * DAY
    decision = evaluate_check(failed(), PRESENT, now, POLICY, manual=True)
    assert decision.new_status is VERIFIED
    assert decision.verified_at == now
    assert decision.event is DomainEvent.VERIFIED
    assert decision.next_check_at == now + DAY


@pytest.mark.parametrize("observation", [ABSENT, UNKNOWN])
def test_manual_check_without_the_record_leaves_a_failed_claim_failed(observation: Observation) -> None:
    decision = evaluate_check(failed(), observation, T0 + 8 * DAY, POLICY, manual=True)
    assert decision.new_status is FAILED
    assert decision.next_check_at is None
    assert decision.event is None


# --- errors never change anything but the schedule ------------------------------------------


@pytest.mark.parametrize("manual", [False, True])
@pytest.mark.parametrize(
    ("facts", "regular_gap"),
    [
        (pending(), 15 * MINUTE),
        (verified(), DAY),
        (verified(missing_since=T0 + 11 * DAY), DAY),
        (suspended(), DAY),
    ],
)
def test_unknown_changes_nothing_but_retries_sooner(facts: ClaimFacts, regular_gap: timedelta, manual: bool) -> None:
    now = T0 + 12 * DAY
    decision = evaluate_check(facts, UNKNOWN, now, POLICY, manual=manual)
    assert decision.new_status is facts.status
    assert decision.verified_at == facts.verified_at
    assert decision.last_seen_at == facts.last_seen_at
    assert decision.missing_since == facts.missing_since
    assert decision.event is None
    assert decision.last_checked_at == now
    assert decision.next_check_at is not None
    assert now < decision.next_check_at <= now + min(POLICY.error_retry_interval, regular_gap)


def test_unknown_retry_does_not_overshoot_the_grace_deadline() -> None:
    policy = LifecyclePolicy(error_retry_interval=HOUR)
    missing_since = T0 + 11 * DAY
    now = missing_since + POLICY.grace_period - 10 * MINUTE
    decision = evaluate_check(verified(missing_since), UNKNOWN, now, policy)
    assert decision.next_check_at == missing_since + POLICY.grace_period


# --- a whole life, following the schedule ----------------------------------------------------


def _apply(facts: ClaimFacts, decision: Decision) -> ClaimFacts:
    return ClaimFacts(
        status=decision.new_status,
        created_at=facts.created_at,
        verified_at=decision.verified_at,
        last_seen_at=decision.last_seen_at,
        missing_since=decision.missing_since,
        last_checked_at=decision.last_checked_at,
    )


def test_pending_verified_missing_suspended_back_verified() -> None:
    facts = pending()
    now = T0 + 30 * MINUTE
    events: list[tuple[DomainEvent | None, DomainStatus, bool]] = []

    def check(observation: Observation) -> Decision:
        nonlocal facts, now
        decision = evaluate_check(facts, observation, now, POLICY)
        facts = _apply(facts, decision)
        events.append((decision.event, decision.new_status, is_listed(decision.new_status)))
        assert decision.next_check_at is not None
        now = decision.next_check_at
        return decision

    check(ABSENT)
    check(PRESENT)
    check(PRESENT)
    check(UNKNOWN)  # a failed lookup while the record is there changes nothing
    first_miss = now
    check(ABSENT)
    check(UNKNOWN)
    check(ABSENT)
    check(ABSENT)
    check(ABSENT)  # 72 h after the first miss
    assert facts.missing_since == first_miss
    check(ABSENT)
    check(PRESENT)

    assert events == [
        (None, PENDING, False),
        (DomainEvent.VERIFIED, VERIFIED, True),
        (None, VERIFIED, True),
        (None, VERIFIED, True),
        (DomainEvent.RECORD_MISSING, VERIFIED, True),
        (None, VERIFIED, True),
        (None, VERIFIED, True),
        (None, VERIFIED, True),
        (DomainEvent.SUSPENDED, SUSPENDED, False),
        (None, SUSPENDED, False),
        (DomainEvent.REVERIFIED, VERIFIED, True),
    ]
    assert facts.missing_since is None


# --- listing and validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "listed"), [(PENDING, False), (VERIFIED, True), (SUSPENDED, False), (FAILED, False)]
)
def test_only_verified_is_listed(status: DomainStatus, listed: bool) -> None:
    assert is_listed(status) is listed


def test_statuses_compare_as_their_stored_strings() -> None:
    facts = ClaimFacts(status="failed", created_at=T0)  # type: ignore[arg-type]  # as read from a row
    assert evaluate_check(facts, PRESENT, T0 + DAY, POLICY).new_status is FAILED
    assert is_listed("verified")  # type: ignore[arg-type]


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        evaluate_check(pending(), PRESENT, datetime(2025, 3, 1, 12, 0), POLICY)


@pytest.mark.parametrize(
    "changes",
    [
        {"pending_window": timedelta(0)},
        {"pending_recheck_interval": -MINUTE},
        {"verified_recheck_interval": timedelta(0)},
        {"suspended_recheck_interval": timedelta(0)},
        {"error_retry_interval": timedelta(0)},
        {"grace_period": -MINUTE},
        {"pending_recheck_interval": HOUR, "pending_recheck_max_interval": MINUTE},
    ],
)
def test_policy_refuses_nonsense(changes: dict[str, timedelta]) -> None:
    with pytest.raises(ValueError, match="must"):
        LifecyclePolicy(**changes)


def test_policy_defaults() -> None:
    assert POLICY.pending_window == 7 * DAY
    assert POLICY.verified_recheck_interval == DAY
    assert POLICY.grace_period == 72 * HOUR
    assert POLICY.pending_recheck_interval == 15 * MINUTE
