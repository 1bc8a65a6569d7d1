"""Rotation policy over a tenant's signing keys: which key signs, which are published.

A key's life, on the clock passed in by the caller:

* ``created_at``: published in the JWKS from this instant.
* ``activates_at``: signs from this instant. A new key activates ``publish_lead``
  after it is created, so verifiers that cache the JWKS fetch it before the first
  token it signed reaches them. A tenant's first key, or any key made while no key
  can sign, activates at once: there is nothing else to sign with.
* ``retired_at``: stops signing from this instant (set when the next key is made,
  to the next key's ``activates_at``; ``None`` while no successor exists).
* ``retired_at + retain_for``: leaves the JWKS. ``retain_for`` must cover the longest
  lifetime of anything the key signed plus a margin for clock skew and JWKS caches.

All functions are pure; the repository stores records and applies a
:class:`Rotation` in one transaction, updating each retired record with a
compare-and-set on the ``retired_at`` it had when the plan was made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

__all__ = [
    "DEFAULT_PUBLISH_LEAD",
    "NoSigningKey",
    "Rotation",
    "SigningKeyRecord",
    "published_keys",
    "removable_keys",
    "rotate",
    "current_signing_key",
]

DEFAULT_PUBLISH_LEAD = timedelta(minutes=10)
"""How long a new key is published before it signs; keep it above the JWKS max-age."""


class NoSigningKey(LookupError):
    """No key of the tenant can sign at the given instant."""


@dataclass(frozen=True, slots=True)
class SigningKeyRecord:
    """The lifecycle of one signing key (the key material lives elsewhere).

    Attributes:
        kid: The key's id (its RFC 7638 thumbprint).
        created_at: When the key was made and published.
        activates_at: When it starts signing.
        retired_at: When it stops signing; ``None`` until a successor exists.
    """

    kid: str
    created_at: datetime
    activates_at: datetime
    retired_at: datetime | None = None

    def signs_at(self, now: datetime) -> bool:
        """Tell whether this key may sign at ``now``.

        Args:
            now: The instant (timezone-aware).

        Returns:
            True between ``activates_at`` (inclusive) and ``retired_at`` (exclusive).
        """
        return self.activates_at <= now and (self.retired_at is None or now < self.retired_at)

    def published_at(self, now: datetime, retain_for: timedelta) -> bool:
        """Tell whether this key belongs in the JWKS at ``now``.

        Args:
            now: The instant (timezone-aware).
            retain_for: How long a key stays published after retirement.

        Returns:
            True from ``created_at`` until ``retired_at + retain_for`` (exclusive).
        """
        if now < self.created_at:
            return False
        return self.retired_at is None or now < self.retired_at + retain_for


@dataclass(frozen=True, slots=True)
class Rotation:
    """The outcome of :func:`rotate`: records to insert and to update.

    Attributes:
        new_key: The record to insert.
        retired: Existing records whose ``retired_at`` was set, to update.
    """

    new_key: SigningKeyRecord
    retired: tuple[SigningKeyRecord, ...]


def current_signing_key(records: Sequence[SigningKeyRecord], now: datetime) -> SigningKeyRecord:
    """Return the key that signs at ``now``.

    Args:
        records: All of the tenant's key records.
        now: The instant (timezone-aware).

    Returns:
        Of the keys that may sign, the one activated last (ties: created last).

    Raises:
        NoSigningKey: No key may sign at ``now``.
    """
    _check_aware(now)
    candidates = [record for record in records if record.signs_at(now)]
    if not candidates:
        raise NoSigningKey("no signing key is active")
    return max(candidates, key=lambda r: (r.activates_at, r.created_at, r.kid))


def published_keys(records: Sequence[SigningKeyRecord], now: datetime, retain_for: timedelta) -> list[SigningKeyRecord]:
    """Return the keys to publish in the JWKS at ``now``, newest first.

    Args:
        records: All of the tenant's key records.
        now: The instant (timezone-aware).
        retain_for: How long a key stays published after it stops signing.

    Returns:
        Keys created by ``now`` and not retired for ``retain_for`` or longer.
    """
    _check_aware(now)
    _check_not_negative(retain_for, "retain_for")
    live = [record for record in records if record.published_at(now, retain_for)]
    return sorted(live, key=lambda r: (r.created_at, r.activates_at, r.kid), reverse=True)


def removable_keys(records: Sequence[SigningKeyRecord], now: datetime, retain_for: timedelta) -> list[SigningKeyRecord]:
    """Return retired keys no longer published, whose material may be deleted.

    Args:
        records: All of the tenant's key records.
        now: The instant (timezone-aware).
        retain_for: How long a key stays published after it stops signing.

    Returns:
        Retired keys with ``now >= retired_at + retain_for``.
    """
    _check_aware(now)
    _check_not_negative(retain_for, "retain_for")
    return [record for record in records if record.retired_at is not None and now >= record.retired_at + retain_for]


def rotate(
    records: Sequence[SigningKeyRecord],
    now: datetime,
    new_kid: str,
    publish_lead: timedelta = DEFAULT_PUBLISH_LEAD,
) -> Rotation:
    """Plan the introduction of a new signing key.

    The new key is published at ``now`` and signs from ``now + publish_lead``; the key
    signing at ``now`` keeps signing until then and is retired at that instant. When no
    key signs at ``now`` (first key) the new key activates at once. A key still waiting
    to activate from an earlier rotation is superseded: retired at ``now``, it never
    signs. Emergency rotation after a compromise passes ``publish_lead=timedelta(0)``.

    Args:
        records: All of the tenant's key records.
        now: The instant (timezone-aware).
        new_kid: The new key's id.
        publish_lead: Delay between publishing and signing.

    Returns:
        The record to insert and the records to update.

    Raises:
        ValueError: ``new_kid`` already exists, ``now`` is naive, or
            ``publish_lead`` is negative.
    """
    _check_aware(now)
    _check_not_negative(publish_lead, "publish_lead")
    if any(record.kid == new_kid for record in records):
        raise ValueError("new_kid is already one of the tenant's keys")
    try:
        current: SigningKeyRecord | None = current_signing_key(records, now)
    except NoSigningKey:
        current = None
    activates_at = now if current is None else now + publish_lead
    new_key = SigningKeyRecord(kid=new_kid, created_at=now, activates_at=activates_at)
    retired: list[SigningKeyRecord] = []
    for record in records:
        if record.retired_at is not None and record.retired_at <= now:
            continue
        # The signing key hands over when the new key activates; any other live key
        # (one still waiting to activate) is superseded and never signs.
        retired.append(replace(record, retired_at=activates_at if record is current else now))
    return Rotation(new_key=new_key, retired=tuple(retired))


def _check_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be timezone-aware")


def _check_not_negative(delta: timedelta, name: str) -> None:
    if delta < timedelta(0):
        raise ValueError(f"{name} must not be negative")
