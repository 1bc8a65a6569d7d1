"""OpenID Connect Back-Channel Logout 1.0: the company's IdP signs a user out of Frontdoor.

When a user signs out at the IdP (or the IdP ends their session), an IdP that supports
Back-Channel Logout posts a signed logout token to the connection's
``backchannel_logout_uri`` (``{issuer}/oidc/backchannel-logout``). :func:`backchannel_logout`
checks it as §2.6 says (`verify_logout_token`: signature by a key of the IdP's JWKS, with
one refetch after an unknown ``kid``; ``typ`` ``logout+jwt`` when present; ``iss``; ``aud``
our ``client_id``; ``iat``; ``exp`` when present; the logout event in ``events``; ``sub`` or
``sid``; no ``nonce``), refuses a ``jti`` seen before (Redis, one claim per IdP and ``jti``
while the token could still be accepted), then, in this tenant only and in one transaction
(every Account Token revoked, every Session signed out, events and audit written; no
database connection is held while the IdP's metadata and keys are fetched):

- with a ``sid`` and a ``sub`` (what most IdPs send): that account's sign-ins of that IdP
  session (recorded with them as `idp_session_hash` of ``iss`` and ``sid`` when the ID token
  carried it, `frontdoor_sessions.oidc_login`) and that account's sign-ins that kept no
  IdP session and may have come through the OIDC connection: ``login_via`` ``oidc`` (the
  ID token had no ``sid``), or unknown (made before ``login_via`` was kept, except a
  mediated one): a logout must not be missed. Its sign-ins of another IdP session, through
  the signed login handoff, or mediated, stay;
- with a ``sid`` only (§2.7): the sign-ins that IdP session made, whatever the account (a
  sign-in that kept no IdP session cannot be told to be the user's, and stays);
- with a ``sub`` only: every sign-in of the account it names (`disconnect_account`).

The ``jti`` is claimed before the transaction, so two deliveries of one token never both
act and a token that took effect is refused ever after; when the transaction fails (or is
cancelled) the claim is released, so the IdP's retry of the same token is not taken for a
replay and the logout is not lost.

The connection's ``account_claim`` must be ``sub`` (settings validation), so the token's
``sub`` is the account ID. A token with neither is refused by `verify_logout_token`.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Final

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.db import transaction
from frontdoor_core.errors import Unavailable
from frontdoor_core.outbound import SafeFetcher
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.issuer_settings import LoginConnection
from joserfc.jwk import KeySet

from .disconnect import disconnect_account
from .oidc_id_token import (
    ID_TOKEN_SKEW,
    MAX_ID_TOKEN_AGE,
    IdTokenError,
    IdTokenReason,
    idp_session_hash,
    session_id_claim,
    verify_logout_token,
)
from .oidc_provider import ProviderUnavailable, discover, provider_keys, refetched_keys
from .replay_cache import ReplayCache
from .revocation import RevocationSummary, revoke_sign_ins

__all__ = ["BACKCHANNEL_LOGOUT_PATH", "LogoutRefused", "backchannel_logout"]

BACKCHANNEL_LOGOUT_PATH: Final = "/oidc/backchannel-logout"
"""Appended to the tenant's issuer: the ``backchannel_logout_uri`` the admin registers at the IdP."""
_JTI_TTL: Final = MAX_ID_TOKEN_AGE + 2 * ID_TOKEN_SKEW
"""A logout token is accepted at most this long after its ``iat``: its ``jti`` is kept that long."""


class LogoutRefused(Exception):
    """The logout token is not accepted; ``reason`` is safe to log (never a claim's value)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"logout token refused: {reason}")
        self.reason = reason


async def backchannel_logout(pool: asyncpg.Pool, login: LoginConnection, *, tenant_id: str, token: str,
                             now: datetime, fetcher: SafeFetcher, redis: aioredis.Redis) -> RevocationSummary:
    """Verify the IdP's logout token and disconnect the account it names, in this tenant.

    Raises:
        LogoutRefused: Back-channel logout is off, the IdP cannot be reached, or the token
            fails a check (``reason`` names which), or its ``jti`` was used before.
        Unavailable: Redis could not check the ``jti`` (fail closed, 503).
    """
    if login.type != "oidc" or not login.backchannel_logout or login.issuer is None or login.client_id is None:
        raise LogoutRefused("disabled")
    issuer, client_id, at = login.issuer, login.client_id, int(now.timestamp())

    def check(keys: KeySet) -> dict[str, object]:
        return verify_logout_token(token, keys=keys, issuer=issuer, client_id=client_id, now=at,
                                   algorithms=meta.algorithms())

    try:
        meta = await discover(issuer, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
        try:
            claims = check(await provider_keys(meta, tenant_id=tenant_id, fetcher=fetcher, redis=redis))
        except IdTokenError as exc:
            if exc.reason is not IdTokenReason.UNKNOWN_KEY:
                raise
            fresh = await refetched_keys(meta, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
            if fresh is None:
                raise
            claims = check(fresh)
    except ProviderUnavailable as exc:
        raise LogoutRefused(f"provider_{exc.problem}") from None
    except IdTokenError as exc:
        raise LogoutRefused(str(exc.reason)) from None
    raw_sub = claims.get("sub")
    subject = raw_sub if isinstance(raw_sub, str) else None
    sid = session_id_claim(claims)
    replays = ReplayCache(redis)
    claim = ("oidc-logout", f"{tenant_id}\x00{issuer}", str(claims["jti"]))
    (fresh_jti,) = await replays.claim_all([(*claim, _JTI_TTL)])
    if not fresh_jti:
        raise LogoutRefused("replayed_jti")
    actor = Actor(tenant_id=tenant_id, type="system")
    try:
        async with transaction(pool) as conn:
            if sid is None:
                assert subject is not None  # verify_logout_token: sub or sid
                return await disconnect_account(conn, actor, account_id=subject, client_id=None, now=now,
                                                via="oidc_backchannel_logout")
            return await _end_idp_session(conn, actor, idp_session_hash(meta.issuer, sid), account_id=subject,
                                          now=now)
    except BaseException:
        # Nothing was revoked: the IdP's retry of this token must not be refused as a replay.
        # If Redis fails too, the claim stays until its TTL (the original error is raised).
        with contextlib.suppress(Unavailable):
            await replays.release(*claim)
        raise


async def _end_idp_session(conn: asyncpg.Connection, actor: Actor, idp_session: str, *, account_id: str | None,
                           now: datetime) -> RevocationSummary:
    """Revoke the live sign-ins of one IdP session; one audit row per account.

    With ``account_id``: only that account's, and also its sign-ins that kept no IdP session
    and may have come through the OIDC connection (``login_via`` ``oidc``, or NULL: made
    before it was kept, unless mediated): the IdP session may be the one they came from.
    """
    rows = await conn.fetch(
        "SELECT id, account_id, idp_session IS NULL AS sessionless FROM sign_ins WHERE tenant_id = $1"
        " AND revoked_at IS NULL AND ((idp_session = $2 AND ($3::text IS NULL OR account_id = $3))"
        " OR (account_id = $3 AND idp_session IS NULL"
        "     AND (login_via = 'oidc' OR (login_via IS NULL AND type <> 'mediated'))))"
        " ORDER BY account_id, id FOR UPDATE",
        actor.tenant_id, idp_session, account_id)
    by_account: dict[str, list[str]] = {}
    sessionless: dict[str, int] = {}
    for r in rows:
        by_account.setdefault(r["account_id"], []).append(r["id"])
        sessionless[r["account_id"]] = sessionless.get(r["account_id"], 0) + int(r["sessionless"])
    total = RevocationSummary()
    for account, ids in by_account.items():
        done = await revoke_sign_ins(conn, actor.tenant_id, ids, now=now, reason="disconnected")
        await audit.record(conn, actor, "account.disconnected", target_type="account", target_id=account,
                           details={"client_id": None, "via": "oidc_backchannel_logout", "idp_session": True,
                                    "without_idp_session": sessionless[account], **msgspec.structs.asdict(done)})
        total = total + done
    return total
