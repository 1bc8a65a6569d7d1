"""The life of a domain claim: what one DNS check does to it, as a pure function.

States::

    pending --PRESENT--> verified --ABSENT for >= grace--> suspended
       |                    ^                                  |
       | ABSENT after the   +-----------PRESENT----------------+
       v pending window
    failed --PRESENT on a manual check--> verified

Rules (issue 2 §5):

* ``UNKNOWN`` (timeout, SERVFAIL...) never changes a status or a timestamp
  other than the schedule: no verifying, failing or suspending on an error. The
  retry comes sooner than the regular check (``error_retry_interval``).
* A verified domain whose record is missing stays verified, and listed, with
  ``missing_since`` set at the first miss; it is suspended by the first check
  that still misses it once ``grace_period`` has elapsed since then. Seeing the
  record again clears ``missing_since``.
* ``failed`` is terminal for scheduled checks; a manual check that sees the
  record verifies it.

Scheduling: verified domains are checked every ``verified_recheck_interval``,
but never later than the end of a running grace period, so suspension happens
on time. Pending claims back off with their age: a quarter of the claim's age,
at least ``pending_recheck_interval`` and at most
``pending_recheck_max_interval``, and never later than the end of the pending
window (so the claim fails on time). With the defaults that is every 15 min for
the first hour, then growing to every 6 h after a day: about 40 lookups over 7
days instead of 672 at a fixed 15 min, while a record added right after the
claim is noticed within minutes.
"""

from datetime import datetime, timedelta
from enum import StrEnum

import msgspec

from frontdoor_tenancy.domains.observation import Observation

_PENDING_BACKOFF_DIVISOR = 4


class DomainStatus(StrEnum):
    """Where a claim stands."""

    PENDING = "pending"
    VERIFIED = "verified"
    SUSPENDED = "suspended"
    FAILED = "failed"


class DomainEvent(StrEnum):
    """Audit-log action names for the transitions a check can cause."""

    VERIFIED = "domain.verified"
    FAILED = "domain.failed"
    SUSPENDED = "domain.suspended"
    REVERIFIED = "domain.reverified"
    RECORD_MISSING = "domain.record_missing"


class LifecyclePolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The timings of the lifecycle, all configurable.

    Attributes:
        pending_window: How long a claim may stay pending before it fails.
        pending_recheck_interval: The shortest gap between scheduled checks of
            a pending claim (used while the claim is young).
        pending_recheck_max_interval: The longest gap between scheduled checks
            of a pending claim.
        verified_recheck_interval: The gap between checks of a verified domain.
        suspended_recheck_interval: The gap between checks of a suspended
            domain, looking for the record to come back.
        grace_period: How long a verified domain's record may be missing
            before the domain is suspended. Zero suspends on the first miss.
        error_retry_interval: The gap before retrying after an inconclusive
            lookup, when the regular schedule would be later.

    Raises:
        ValueError: If an interval is not positive or the grace period is
            negative.
    """

    pending_window: timedelta = timedelta(days=7)
    pending_recheck_interval: timedelta = timedelta(minutes=15)
    pending_recheck_max_interval: timedelta = timedelta(hours=6)
    verified_recheck_interval: timedelta = timedelta(days=1)
    suspended_recheck_interval: timedelta = timedelta(days=1)
    grace_period: timedelta = timedelta(hours=72)
    error_retry_interval: timedelta = timedelta(minutes=15)

    def __post_init__(self) -> None:
        zero = timedelta(0)
        intervals = (
            self.pending_window,
            self.pending_recheck_interval,
            self.pending_recheck_max_interval,
            self.verified_recheck_interval,
            self.suspended_recheck_interval,
            self.error_retry_interval,
        )
        if any(interval <= zero for interval in intervals):
            raise ValueError("lifecycle intervals must be positive")
        if self.grace_period < zero:
            raise ValueError("grace_period must not be negative")
        if self.pending_recheck_max_interval < self.pending_recheck_interval:
            raise ValueError("pending_recheck_max_interval must be >= pending_recheck_interval")


class ClaimFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What is stored about a claim, as the lifecycle needs it.

    Attributes:
        status: The current status.
        created_at: When the claim was made; starts the pending window.
        verified_at: When the claim last became verified, if ever.
        last_seen_at: When the record was last observed.
        missing_since: The first check, since it was last seen, that missed
            the record of a verified or suspended domain.
        last_checked_at: When the last check ran, if ever.
    """

    status: DomainStatus
    created_at: datetime
    verified_at: datetime | None = None
    last_seen_at: datetime | None = None
    missing_since: datetime | None = None
    last_checked_at: datetime | None = None


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """What to store after a check, and what to audit.

    Attributes:
        new_status: The status after the check.
        verified_at: Set to the check time on a transition into verified,
            otherwise carried over.
        last_seen_at: The check time when the record was seen, otherwise
            carried over.
        missing_since: When the record was first found missing, or None.
        last_checked_at: The check time.
        next_check_at: When the scheduler should check again; None for failed
            claims, which are never checked on a schedule.
        event: The audit action for the transition, or None if nothing worth
            auditing happened.
    """

    new_status: DomainStatus
    verified_at: datetime | None
    last_seen_at: datetime | None
    missing_since: datetime | None
    last_checked_at: datetime
    next_check_at: datetime | None
    event: DomainEvent | None


def is_listed(status: DomainStatus) -> bool:
    """Tell whether a domain appears in its issuer's ``poppy_domains``.

    Only verified domains are listed, including while their record is missing
    within the grace period; suspended, pending and failed ones are not.

    Args:
        status: The claim's status.

    Returns:
        True for ``verified`` only.
    """
    return status == DomainStatus.VERIFIED


def evaluate_check(
    facts: ClaimFacts,
    observation: Observation,
    now: datetime,
    policy: LifecyclePolicy,
    *,
    manual: bool = False,
) -> Decision:
    """Apply one check's observation to a claim.

    Args:
        facts: The claim as stored before the check.
        observation: What the check saw.
        now: When the check ran (timezone-aware).
        policy: The timings.
        manual: True for an admin's "verify now", which may revive a failed
            claim; scheduled checks leave failed claims alone.

    Returns:
        The claim's new state, its next check and the audit event, if any.

    Raises:
        ValueError: If ``now`` is naive or the status is unknown.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")
    if not isinstance(facts.status, DomainStatus):
        # msgspec does not validate on construction; a row's plain string
        # must not leak into the Decision.
        facts = msgspec.structs.replace(facts, status=DomainStatus(facts.status))
    if facts.status == DomainStatus.FAILED and not manual:
        return _keep(facts, now, next_check_at=None)
    if observation == Observation.PRESENT:
        return _seen(facts, now, policy)
    if observation == Observation.ABSENT:
        return _missed(facts, now, policy)
    return _keep(facts, now, next_check_at=_retry_after_error(facts, now, policy))


def _seen(facts: ClaimFacts, now: datetime, policy: LifecyclePolicy) -> Decision:
    event: DomainEvent | None
    verified_at = now
    if facts.status == DomainStatus.SUSPENDED:
        event = DomainEvent.REVERIFIED
    elif facts.status == DomainStatus.VERIFIED:
        event = None
        verified_at = facts.verified_at or now
    else:
        event = DomainEvent.VERIFIED
    return Decision(
        new_status=DomainStatus.VERIFIED,
        verified_at=verified_at,
        last_seen_at=now,
        missing_since=None,
        last_checked_at=now,
        next_check_at=now + policy.verified_recheck_interval,
        event=event,
    )


def _missed(facts: ClaimFacts, now: datetime, policy: LifecyclePolicy) -> Decision:
    status = facts.status
    if status == DomainStatus.PENDING:
        if now - facts.created_at >= policy.pending_window:
            return _with(facts, now, status=DomainStatus.FAILED, next_check_at=None, event=DomainEvent.FAILED)
        return _keep(facts, now, next_check_at=_pending_next_check(facts, now, policy))
    if status == DomainStatus.FAILED:
        return _keep(facts, now, next_check_at=None)
    missing_since = facts.missing_since or now
    if status == DomainStatus.SUSPENDED:
        return _with(
            facts,
            now,
            missing_since=missing_since,
            next_check_at=now + policy.suspended_recheck_interval,
        )
    if now - missing_since >= policy.grace_period:
        return _with(
            facts,
            now,
            status=DomainStatus.SUSPENDED,
            missing_since=missing_since,
            next_check_at=now + policy.suspended_recheck_interval,
            event=DomainEvent.SUSPENDED,
        )
    return _with(
        facts,
        now,
        missing_since=missing_since,
        next_check_at=min(now + policy.verified_recheck_interval, missing_since + policy.grace_period),
        event=DomainEvent.RECORD_MISSING if facts.missing_since is None else None,
    )


def _retry_after_error(facts: ClaimFacts, now: datetime, policy: LifecyclePolicy) -> datetime | None:
    retry = now + policy.error_retry_interval
    match facts.status:
        case DomainStatus.PENDING:
            return min(retry, _pending_next_check(facts, now, policy))
        case DomainStatus.VERIFIED:
            regular = now + policy.verified_recheck_interval
            if facts.missing_since is not None and facts.missing_since + policy.grace_period > now:
                regular = min(regular, facts.missing_since + policy.grace_period)
            return min(retry, regular)
        case DomainStatus.SUSPENDED:
            return min(retry, now + policy.suspended_recheck_interval)
        case DomainStatus.FAILED:
            return None


def _pending_next_check(facts: ClaimFacts, now: datetime, policy: LifecyclePolicy) -> datetime:
    age = max(now - facts.created_at, timedelta(0))
    interval = min(
        max(age / _PENDING_BACKOFF_DIVISOR, policy.pending_recheck_interval),
        policy.pending_recheck_max_interval,
    )
    deadline = facts.created_at + policy.pending_window
    if deadline > now:
        return min(now + interval, deadline)
    # Only reached after an inconclusive check past the deadline: the claim
    # may only fail on a definitive answer, so keep asking.
    return now + interval


def _keep(facts: ClaimFacts, now: datetime, *, next_check_at: datetime | None) -> Decision:
    return _with(facts, now, next_check_at=next_check_at)


def _with(
    facts: ClaimFacts,
    now: datetime,
    *,
    next_check_at: datetime | None,
    status: DomainStatus | None = None,
    missing_since: datetime | None = None,
    event: DomainEvent | None = None,
) -> Decision:
    return Decision(
        new_status=status or facts.status,
        verified_at=facts.verified_at,
        last_seen_at=facts.last_seen_at,
        missing_since=missing_since or facts.missing_since,
        last_checked_at=now,
        next_check_at=next_check_at,
        event=event,
    )
