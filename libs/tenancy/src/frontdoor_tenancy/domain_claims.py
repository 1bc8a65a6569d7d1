"""Domain claims: add, list, remove, check by DNS (on demand and on schedule).

A check does its DNS lookup outside any transaction, then re-reads the claim under a
row lock and applies the pure lifecycle (`domains.evaluate_check`) to what is stored
now, so a concurrent check or deletion cannot be overwritten. Verification is a
compare-and-set guarded by a partial unique index: a domain is verified for at most one
tenant at a time, whatever the race.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id

from . import audit, outbox_events
from .actor import Actor
from .domains import (
    ClaimFacts,
    Decision,
    DomainEvent,
    DomainStatus,
    InvalidDomain,
    LifecyclePolicy,
    Observation,
    TxtLookup,
    challenge_name,
    challenge_value,
    evaluate_check,
    match_challenge,
    new_challenge_token,
    normalize_domain,
)
from .domains.txt_lookup import Absent, Found, Indeterminate

__all__ = [
    "MAX_DOMAINS_PER_TENANT",
    "DomainView",
    "TxtRecord",
    "add_domain",
    "check_domain",
    "claim_due",
    "delete_domain",
    "get_domain",
    "list_domains",
    "listed_domains",
    "parse_domain",
    "policy_from",
    "run_due_checks",
]

MAX_DOMAINS_PER_TENANT = 50
# A scheduled check leases a due row for this long so two workers do not both check it.
_LEASE = timedelta(minutes=5)


class TxtRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The record the company publishes."""

    type: str = "TXT"
    name: str
    value: str


class DomainView(msgspec.Struct, frozen=True, kw_only=True):
    """A claim as the management API shows it."""

    domain: str
    status: str
    txt: TxtRecord
    created_at: datetime
    verified_at: datetime | None
    last_checked_at: datetime | None
    last_seen_at: datetime | None
    missing_since: datetime | None
    next_check_at: datetime | None
    last_check_result: str | None


_COLUMNS = (
    "id, domain, status, challenge_token, created_at, verified_at, last_checked_at, last_seen_at, "
    "missing_since, next_check_at, last_check_result"
)


def _view(row: asyncpg.Record) -> DomainView:
    return DomainView(
        domain=row["domain"], status=row["status"],
        txt=TxtRecord(name=challenge_name(row["domain"]), value=challenge_value(row["challenge_token"])),
        created_at=row["created_at"], verified_at=row["verified_at"], last_checked_at=row["last_checked_at"],
        last_seen_at=row["last_seen_at"], missing_since=row["missing_since"], next_check_at=row["next_check_at"],
        last_check_result=row["last_check_result"],
    )


def parse_domain(raw: str) -> str:
    """Normalise user input or raise `Invalid` (422) with the precise reason."""
    try:
        return normalize_domain(raw)
    except InvalidDomain as exc:
        raise Invalid(f"invalid_domain.{exc.code}", str(exc.message), fields={"domain": str(exc.message)}) from None


async def add_domain(conn: asyncpg.Connection, actor: Actor, raw: str, *, now: datetime,
                     policy: LifecyclePolicy) -> DomainView:
    """Claim a domain for the actor's tenant (status ``pending``) with a fresh challenge."""
    domain = parse_domain(raw)
    await conn.execute("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE", actor.tenant_id)
    count = await conn.fetchval("SELECT count(*) FROM domains WHERE tenant_id = $1", actor.tenant_id)
    if count >= MAX_DOMAINS_PER_TENANT:
        raise Conflict("too_many_domains", f"A tenant can claim at most {MAX_DOMAINS_PER_TENANT} domains.")
    try:
        row = await conn.fetchrow(
            f"""
            INSERT INTO domains (tenant_id, id, domain, status, challenge_token, created_at, next_check_at)
            VALUES ($1, $2, $3, 'pending', $4, $5, $6)
            RETURNING {_COLUMNS}
            """,
            actor.tenant_id, new_id("dom"), domain, new_challenge_token(), now, now + policy.pending_recheck_interval,
        )
    except asyncpg.UniqueViolationError:
        raise Conflict("domain_exists", "You already claimed this domain.", fields={"domain": "already claimed"}) from None
    await audit.record(conn, actor, "domain.added", target_type="domain", target_id=domain, at=now)
    return _view(row)


async def list_domains(conn: asyncpg.Connection, tenant_id: str, *, after: tuple[datetime, str] | None = None,
                       limit: int | None = None) -> list[DomainView]:
    """The tenant's claims, in the order they were made; keyset-paged by ``(created_at, domain)``."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = $1"
        " AND ($2::timestamptz IS NULL OR (created_at, domain) > ($2, $3::text)) ORDER BY created_at, domain LIMIT $4",
        tenant_id, after[0] if after else None, after[1] if after else None, limit)
    return [_view(r) for r in rows]


async def get_domain(conn: asyncpg.Connection, tenant_id: str, raw: str) -> DomainView:
    """One claim; another tenant's claim is the same 404 as no claim."""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = $1 AND domain = $2", tenant_id, parse_domain(raw)
    )
    if row is None:
        raise NotFound("domain_not_found", "No such domain on your account.")
    return _view(row)


async def delete_domain(conn: asyncpg.Connection, actor: Actor, raw: str) -> None:
    """Remove a claim (a verified domain leaves ``poppy_domains`` at once)."""
    domain = parse_domain(raw)
    status = await conn.fetchval(
        "DELETE FROM domains WHERE tenant_id = $1 AND domain = $2 RETURNING status", actor.tenant_id, domain
    )
    if status is None:
        raise NotFound("domain_not_found", "No such domain on your account.")
    await audit.record(conn, actor, "domain.removed", target_type="domain", target_id=domain,
                       details={"status": status})


async def listed_domains(conn: asyncpg.Connection, tenant_id: str) -> list[str]:
    """Domains the issuer metadata lists in ``poppy_domains`` (verified only)."""
    rows = await conn.fetch(
        "SELECT domain FROM domains WHERE tenant_id = $1 AND status = 'verified' ORDER BY domain", tenant_id
    )
    return [r["domain"] for r in rows]


def _result_text(result: object) -> str:
    if isinstance(result, Found):
        return "record_found" if result.values else "no_records"
    if isinstance(result, Absent):
        return f"absent:{result.reason}"
    if isinstance(result, Indeterminate):
        return f"lookup_error:{result.reason}"
    return "unknown"


async def check_domain(
    pool: asyncpg.Pool,
    actor: Actor,
    domain_id_or_name: str,
    *,
    lookup: TxtLookup,
    now: datetime,
    policy: LifecyclePolicy,
    manual: bool,
    by_id: bool = False,
) -> DomainView:
    """Look the challenge up and apply the lifecycle; audit any transition."""
    key_sql = "id" if by_id else "domain"
    key = domain_id_or_name if by_id else parse_domain(domain_id_or_name)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            f"SELECT domain, challenge_token FROM domains WHERE tenant_id = $1 AND {key_sql} = $2",
            actor.tenant_id, key,
        )
    if row is None:
        raise NotFound("domain_not_found", "No such domain on your account.")
    result = await lookup.lookup(challenge_name(row["domain"]))
    observation = match_challenge(result, challenge_value(row["challenge_token"]))
    detail = _result_text(result)
    if observation is Observation.PRESENT:
        detail = "record_matches"
    elif observation is Observation.ABSENT and isinstance(result, Found):
        detail = "record_value_differs" if result.values else "no_records"

    async with pool.acquire() as conn, conn.transaction():
        cur = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM domains WHERE tenant_id = $1 AND {key_sql} = $2 FOR UPDATE",
            actor.tenant_id, key,
        )
        if cur is None or cur["challenge_token"] != row["challenge_token"]:
            raise NotFound("domain_not_found", "No such domain on your account.")
        facts = ClaimFacts(
            status=DomainStatus(cur["status"]), created_at=cur["created_at"], verified_at=cur["verified_at"],
            last_seen_at=cur["last_seen_at"], missing_since=cur["missing_since"],
            last_checked_at=cur["last_checked_at"],
        )
        decision = evaluate_check(facts, observation, now, policy, manual=manual)
        new_status = decision.new_status
        event = decision.event
        try:
            async with conn.transaction():
                updated = await _store(conn, actor.tenant_id, cur["id"], d=decision, status=new_status, detail=detail)
        except asyncpg.UniqueViolationError:
            # Another tenant holds this domain verified: nothing changes but the note and schedule.
            event = None
            new_status = facts.status
            detail = "held_by_another_tenant"
            updated = await conn.fetchrow(
                f"""
                UPDATE domains SET last_checked_at = $3, next_check_at = $4, last_check_result = $5
                 WHERE tenant_id = $1 AND id = $2 RETURNING {_COLUMNS}
                """,
                actor.tenant_id, cur["id"], now, now + policy.pending_recheck_interval, detail,
            )
        if event is not None:
            await audit.record(conn, actor, str(event), target_type="domain", target_id=cur["domain"], at=now,
                               details={"from": facts.status.value, "to": new_status.value, "check": detail,
                                        "manual": manual})
            await _record_webhook_event(conn, actor.tenant_id, event, facts.status, updated, now=now)
        return _view(updated)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


async def _record_webhook_event(conn: asyncpg.Connection, tenant_id: str, event: DomainEvent, previous: DomainStatus,
                                row: asyncpg.Record, *, now: datetime) -> None:
    """The ``domain.verified`` / ``domain.suspended`` outbox row, in the check's transaction."""
    if event in (DomainEvent.VERIFIED, DomainEvent.REVERIFIED):
        await outbox_events.record_event(conn, tenant_id, "domain.verified", {
            "domain": row["domain"], "previous_status": previous.value, "verified_at": _iso(row["verified_at"]),
        }, now=now)
    elif event is DomainEvent.SUSPENDED:
        await outbox_events.record_event(conn, tenant_id, "domain.suspended", {
            "domain": row["domain"], "missing_since": _iso(row["missing_since"]),
        }, now=now)


async def _store(conn: asyncpg.Connection, tenant_id: str, domain_id: str, *, d: Decision, status: DomainStatus,
                 detail: str) -> asyncpg.Record:
    return await conn.fetchrow(
        f"""
        UPDATE domains
           SET status = $3, verified_at = $4, last_seen_at = $5, missing_since = $6,
               last_checked_at = $7, next_check_at = $8, last_check_result = $9
         WHERE tenant_id = $1 AND id = $2
        RETURNING {_COLUMNS}
        """,
        tenant_id, domain_id, status.value, d.verified_at, d.last_seen_at, d.missing_since,
        d.last_checked_at, d.next_check_at, detail,
    )


async def claim_due(conn: asyncpg.Connection, now: datetime, *, limit: int = 100) -> list[tuple[str, str]]:
    """Lease up to ``limit`` claims due a scheduled check; return (tenant_id, id) pairs.

    Cross-tenant by design: this is the worker's queue. ``SKIP LOCKED`` plus the lease
    keeps concurrent workers from checking the same claim twice.
    """
    rows = await conn.fetch(
        """
        WITH due AS (
            SELECT tenant_id, id FROM domains
             WHERE status <> 'failed' AND next_check_at <= $1
             ORDER BY next_check_at
             LIMIT $2
             FOR UPDATE SKIP LOCKED
        )
        UPDATE domains d SET next_check_at = $1 + $3::interval
          FROM due WHERE d.tenant_id = due.tenant_id AND d.id = due.id
        RETURNING d.tenant_id, d.id
        """,
        now, limit, _LEASE,
    )
    return [(r["tenant_id"], r["id"]) for r in rows]


def policy_from(
    *, pending_window: timedelta, pending_recheck: timedelta, recheck: timedelta, grace: timedelta
) -> LifecyclePolicy:
    """Build the lifecycle policy from configured intervals."""
    return LifecyclePolicy(
        pending_window=pending_window,
        pending_recheck_interval=pending_recheck,
        pending_recheck_max_interval=max(pending_recheck, timedelta(hours=6)),
        verified_recheck_interval=recheck,
        suspended_recheck_interval=recheck,
        grace_period=grace,
        error_retry_interval=min(pending_recheck, recheck),
    )


async def run_due_checks(
    pool: asyncpg.Pool, *, lookup: TxtLookup, now: datetime, policy: LifecyclePolicy, limit: int = 100,
    concurrency: int = 10,
) -> list[DomainView]:
    """The scheduled job: lease due claims and check each (DNS lookups run concurrently)."""
    import asyncio

    async with pool.acquire() as conn, conn.transaction():
        due = await claim_due(conn, now, limit=limit)
    gate = asyncio.Semaphore(concurrency)

    async def one(tenant_id: str, domain_id: str) -> DomainView | None:
        async with gate:
            try:
                return await check_domain(pool, Actor(tenant_id=tenant_id, type="system"), domain_id,
                                          lookup=lookup, now=now, policy=policy, manual=False, by_id=True)
            except NotFound:
                return None  # deleted meanwhile

    done = await asyncio.gather(*(one(t, d) for t, d in due))
    return [v for v in done if v is not None]
