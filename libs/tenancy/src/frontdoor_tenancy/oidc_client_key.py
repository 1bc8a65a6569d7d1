"""The OpenID Connect login connection's ``private_key_jwt`` signing key (RFC 7523, OIDC Core §9).

A connection whose ``token_endpoint_auth_method`` is ``private_key_jwt`` authenticates
Frontdoor at the IdP's token endpoint with a client assertion signed by a per-tenant
EC P-256 key. :func:`ensure_client_key` creates it on the first save of such a
connection (the private JWK a `Kek` blob, associated data ``oidc_client_key`` + tenant,
in ``oidc_client_keys``); :func:`public_client_jwks` is what ``{issuer}/oidc/jwks.json``
publishes for the admin to register at the IdP as the client's ``jwks_uri``;
:func:`load_client_key` reads the private key that signs now.

:func:`rotate_client_key` rotates it as the issuer's signing keys rotate
(`frontdoor_tenancy.signing_keys`): the new key is published at once and signs from
``activates_at`` = now + the publish lead (an IdP that cached the JWKS, for up to its
``max-age`` of 300 s, fetches the new ``kid`` before the first assertion it signed reaches
it); the key it replaces signs until then and stays published for `RETAIN_FOR` more, which
covers the last assertions it signed (60 s) and clock skew. The row keeps two keys: the
newest (``kid``...) and the one before it (``previous_*``). Rotating again while the newest
still waits to sign supersedes it (it never signed and leaves the JWKS); rotating while the
previous key is still published is refused (`Conflict`), so no key leaves the JWKS before
what it signed has expired; ``compromised`` signs with the new key at once and unpublishes
the others now.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta
from typing import Any, Final

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, NotFound
from joserfc.jwk import ECKey

from .credentials.key_encryption import DecryptionError, Kek, Reencryption, row_aad
from .key_reencryption import reencrypt_tenant_keys

__all__ = [
    "RETAIN_FOR",
    "ClientKeyRotation",
    "ClientKeyState",
    "client_key_states",
    "ensure_client_key",
    "load_client_key",
    "public_client_jwks",
    "reencrypt_oidc_client_keys",
    "rotate_client_key",
]

RETAIN_FOR: Final = timedelta(minutes=10)
"""How long a replaced client key stays published after it stopped signing: its assertions
live 60 s; the rest is for the IdP's clock and a JWKS it refetched just before."""


class ClientKeyRotation(msgspec.Struct, frozen=True, kw_only=True):
    """A rotation: the new ``kid``, when it signs, and the key signing until then."""

    kid: str
    activates_at: datetime
    previous_kid: str | None
    superseded_kid: str | None = None
    """A newer key that was still waiting to sign and was dropped (it never signed)."""


class ClientKeyState(msgspec.Struct, frozen=True, kw_only=True):
    """One published client key, for the dashboard."""

    kid: str
    signs_from: datetime | None
    """None for the key being replaced (it signed before)."""
    signs_until: datetime | None
    """None while no newer key replaces it."""
    published_until: datetime | None
    signing: bool


def _aad(tenant_id: str) -> bytes:
    return row_aad("oidc_client_key", tenant_id)


def _new_key(kek: Kek, tenant_id: str) -> tuple[str, bytes, dict[str, Any]]:
    kid = "fdoidc-" + secrets.token_urlsafe(12)
    key = ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": "ES256"})
    blob = kek.encrypt(json.dumps(key.as_dict(private=True)).encode("ascii"), aad=_aad(tenant_id))
    return kid, blob, dict(key.as_dict(private=False))


def _jwk(raw: Any) -> dict[str, Any]:
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


async def ensure_client_key(conn: asyncpg.Connection, kek: Kek, tenant_id: str, *, now: datetime) -> bool:
    """Create the tenant's client key unless it has one (signing at once); whether one was created."""
    kid, blob, public = _new_key(kek, tenant_id)
    created = await conn.fetchval(
        "INSERT INTO oidc_client_keys (tenant_id, kid, key_ciphertext, public_jwk, created_at, activates_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (tenant_id) DO NOTHING RETURNING true",
        tenant_id, kid, blob, public, now)
    return bool(created)


async def rotate_client_key(conn: asyncpg.Connection, kek: Kek, tenant_id: str, *, now: datetime,
                            publish_lead: timedelta, compromised: bool = False) -> ClientKeyRotation:
    """Publish a new client key now; it signs after ``publish_lead`` (at once when ``compromised``).

    Run in a transaction: the tenant's row is locked, so concurrent rotations serialise.

    Raises:
        NotFound: ``no_client_key``: the tenant never saved a ``private_key_jwt`` connection.
        Conflict: ``client_key_rotation_pending``: the key replaced by the last rotation is
            still published (``retry_after``: seconds until it is not).
    """
    if publish_lead < timedelta(0):
        raise ValueError("publish_lead must not be negative")
    row = await conn.fetchrow(
        "SELECT kid, key_ciphertext, public_jwk, activates_at, previous_kid, previous_retired_at"
        " FROM oidc_client_keys WHERE tenant_id = $1 FOR UPDATE", tenant_id)
    if row is None:
        raise NotFound("no_client_key", "There is no private_key_jwt client key to rotate.")
    kid, blob, public = _new_key(kek, tenant_id)
    activates = now if compromised else now + publish_lead
    if not compromised and row["activates_at"] > now:
        # The newest key never signed: superseded (it leaves the JWKS); the key signing now
        # keeps its material and signs until the new key activates.
        await conn.execute(
            "UPDATE oidc_client_keys SET kid = $2, key_ciphertext = $3, public_jwk = $4, created_at = $5,"
            " activates_at = $6, previous_retired_at = CASE WHEN previous_kid IS NULL THEN NULL ELSE $6::timestamptz END"
            " WHERE tenant_id = $1", tenant_id, kid, blob, public, now, activates)
        return ClientKeyRotation(kid=kid, activates_at=activates, previous_kid=row["previous_kid"],
                                 superseded_kid=row["kid"])
    retired = row["previous_retired_at"]
    if not compromised and row["previous_kid"] is not None and now < retired + RETAIN_FOR:
        raise Conflict("client_key_rotation_pending",
                       "The key replaced by the last rotation is still published; rotate again later.",
                       retry_after=int((retired + RETAIN_FOR - now).total_seconds()) + 1)
    # The key signing now becomes the previous one, signing until the new one activates; the
    # one before it (retired for RETAIN_FOR already) is dropped. Compromised: no previous key,
    # so nothing the old keys signed verifies any more.
    previous: tuple[Any, ...] = ((None, None, None, None) if compromised
                                 else (row["kid"], row["key_ciphertext"], row["public_jwk"], activates))
    await conn.execute(
        "UPDATE oidc_client_keys SET kid = $2, key_ciphertext = $3, public_jwk = $4, created_at = $5,"
        " activates_at = $6, previous_kid = $7, previous_ciphertext = $8, previous_public_jwk = $9,"
        " previous_retired_at = $10 WHERE tenant_id = $1",
        tenant_id, kid, blob, public, now, activates, *previous)
    return ClientKeyRotation(kid=kid, activates_at=activates, previous_kid=None if compromised else row["kid"])


async def load_client_key(conn: asyncpg.Connection, kek: Kek, tenant_id: str, *, now: datetime) -> ECKey | None:
    """The private client key that signs at ``now``, or None (none stored, or no configured KEK opens it)."""
    row = await conn.fetchrow(
        "SELECT CASE WHEN activates_at <= $2 OR previous_ciphertext IS NULL THEN key_ciphertext"
        " ELSE previous_ciphertext END AS blob FROM oidc_client_keys WHERE tenant_id = $1", tenant_id, now)
    if row is None:
        return None
    try:
        return ECKey.import_key(json.loads(kek.decrypt(row["blob"], aad=_aad(tenant_id))))
    except (DecryptionError, ValueError):
        return None


async def public_client_jwks(conn: asyncpg.Connection, tenant_id: str, *, now: datetime) -> dict[str, Any]:
    """``{"keys": [...]}``: the tenant's published public client keys at ``now``, newest first."""
    row = await conn.fetchrow(
        "SELECT public_jwk, previous_public_jwk, previous_retired_at FROM oidc_client_keys WHERE tenant_id = $1",
        tenant_id)
    if row is None:
        return {"keys": []}
    keys = [_jwk(row["public_jwk"])]
    if row["previous_public_jwk"] is not None and now < row["previous_retired_at"] + RETAIN_FOR:
        keys.append(_jwk(row["previous_public_jwk"]))
    return {"keys": keys}


async def client_key_states(conn: asyncpg.Connection, tenant_id: str, *, now: datetime) -> list[ClientKeyState]:
    """The published client keys at ``now``, newest first (what `public_client_jwks` lists)."""
    row = await conn.fetchrow(
        "SELECT kid, activates_at, previous_kid, previous_retired_at FROM oidc_client_keys WHERE tenant_id = $1",
        tenant_id)
    if row is None:
        return []
    newest = row["activates_at"] <= now
    states = [ClientKeyState(kid=row["kid"], signs_from=row["activates_at"], signs_until=None, published_until=None,
                             signing=newest)]
    retired = row["previous_retired_at"]
    if row["previous_kid"] is not None and now < retired + RETAIN_FOR:
        states.append(ClientKeyState(kid=row["previous_kid"], signs_from=None, signs_until=retired,
                                     published_until=retired + RETAIN_FOR, signing=not newest))
    return states


async def reencrypt_oidc_client_keys(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                     dry_run: bool = False) -> Reencryption:
    """Re-encrypt every stored client key (both slots) under the current KEK (KEK rotation; idempotent)."""
    done = [await reencrypt_tenant_keys(pool, kek, table="oidc_client_keys", column=column, label=label,
                                        aad=lambda r: _aad(r["tenant_id"]), batch=batch, dry_run=dry_run)
            for column, label in (("key_ciphertext", "oidc_client_key"),
                                  ("previous_ciphertext", "oidc_client_key_previous"))]
    return Reencryption(column="oidc_client_keys.key_ciphertext+previous_ciphertext",
                        reencrypted=sum(r.reencrypted for r in done), current=sum(r.current for r in done),
                        unreadable=tuple(u for r in done for u in r.unreadable))
