"""Sign-in attempts: how far each Device or Direct Sign-In the user was prompted for got.

A Device or Direct Sign-In in progress lives in Redis (`DeviceStore`, the issuer's browser
flows) and leaves nothing when it expires or is denied; ``sign_ins`` holds only the ones
completed. One ``sign_in_attempts`` row per attempt keeps a timestamp per stage, for the
agent funnel (`frontdoor_operations.funnel`):

- *prompted* (`record_prompt`): a device authorization started, or an authorize request
  accepted;
- ``login`` (`record_stage`): the browser was sent to the company's login page or its IdP;
- ``consent``: the login vouched for an account, the consent page is next; the attempt is a
  *step-up* (``step_up``) when this agent already held a live sign-in of that account then: it
  asks a user it is connected to for more (PAP §4.4: a wider scope takes a new sign-in, whose
  Account Token replaces the old one, PAP-4.4-04);
- decided (`record_decision`): allowed or denied, at consent or by the IdP at its login.

An attempt undecided at ``expires_at`` was abandoned at the last stage it reached. Whether it
was a step-up is known from the consent stage on (the account is unknown before), and decided
then from ``sign_ins``, once: a sign-in revoked later does not change what the attempt was. Stages
only move forward (the first time a stage is reached is kept), never after the attempt
ended, and every statement is scoped by tenant. A Device attempt's ID is derived from the
device handle (`device_attempt_id`), so the device authorization and the device page name
the same attempt without storing anything more in Redis; the device code itself never
reaches this table.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Final, Literal

import asyncpg

from .record_ids import new_record_id

__all__ = ["AttemptStage", "device_attempt_id", "new_attempt_id", "record_decision", "record_prompt", "record_stage"]

AttemptStage = Literal["login", "consent"]
_COLUMN: dict[str, str] = {"login": "login_at", "consent": "consent_at"}


def device_attempt_id(handle: str) -> str:
    """The attempt of the device authorization behind ``handle`` (`DeviceStart.handle`)."""
    return "sia_" + hashlib.sha256(f"sign-in-attempt:{handle}".encode()).hexdigest()[:32]


def new_attempt_id() -> str:
    """A new attempt ID for a Direct Sign-In (``sia_...``, sortable)."""
    return new_record_id("sia")


async def record_prompt(conn: asyncpg.Connection, tenant_id: str, attempt_id: str, *, client_id: str,
                        sign_in_type: Literal["device", "direct"], now: datetime, expires_at: datetime) -> None:
    """The user is prompted to sign in: the attempt starts (once; a repeat changes nothing)."""
    await conn.execute(
        "INSERT INTO sign_in_attempts (tenant_id, id, client_id, type, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        tenant_id, attempt_id, client_id, sign_in_type, now, expires_at)


# A step-up: the agent holds a live sign-in of the account the login just vouched for
# (sign_ins_live_by_account); decided the first time consent is reached, kept after.
_STEP_UP: Final = (
    "step_up = coalesce(step_up, EXISTS (SELECT 1 FROM sign_ins s WHERE s.tenant_id = $1"
    " AND s.account_id = $5 AND s.client_id = sign_in_attempts.client_id AND s.revoked_at IS NULL))")


async def record_stage(conn: asyncpg.Connection, tenant_id: str, attempt_id: str, stage: AttemptStage, *,
                       now: datetime, expires_at: datetime | None = None, account_id: str | None = None) -> bool:
    """The attempt reached ``stage`` at ``now``; ``expires_at`` moves its end later (a Direct
    flow's lifetime restarts at each step). ``account_id`` is the account the login vouched
    for (``consent``): it tells whether the attempt is a step-up. False when the attempt is
    unknown, decided or over."""
    column = _COLUMN[stage]
    step_up = f", {_STEP_UP}" if stage == "consent" and account_id is not None else ""
    status = await conn.execute(
        f"UPDATE sign_in_attempts SET {column} = coalesce({column}, $3){step_up},"  # noqa: S608 (constants only)
        " expires_at = greatest(expires_at, coalesce($4, expires_at))"
        " WHERE tenant_id = $1 AND id = $2 AND decided_at IS NULL AND expires_at > $3",
        tenant_id, attempt_id, now, expires_at, *((account_id,) if step_up else ()))
    return bool(status == "UPDATE 1")


async def record_decision(conn: asyncpg.Connection, tenant_id: str, attempt_id: str, *, allowed: bool,
                          now: datetime) -> bool:
    """The user allowed or denied (the first decision stands). False when unknown, decided or over."""
    status = await conn.execute(
        "UPDATE sign_in_attempts SET decided_at = $3, allowed = $4"
        " WHERE tenant_id = $1 AND id = $2 AND decided_at IS NULL AND expires_at > $3",
        tenant_id, attempt_id, now, allowed)
    return bool(status == "UPDATE 1")
