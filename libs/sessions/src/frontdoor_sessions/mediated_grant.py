"""Mediated Sign-In (PAP §4.7): the agent's credentials, relayed once to the company.

The agent calls ``POST {issuer}/oauth/mediated`` with its Session Token and DPoP proof
(the HTTP layer verifies both) and ``{"scope", "credentials"}``: exactly the fields the
tenant declares. Frontdoor never checks a password itself. It relays the values, server
to server through the SSRF-safe fetcher, to the company's ``relay_url`` in a JWT signed
with the tenant's issuer key (``typ`` `RELAY_TYPE`, ``aud`` the relay's origin, one
minute, one-use ``jti``), and maps the company's answer:

- ``{"status": "complete", "account": ID}`` → `complete_sign_in` (type ``mediated``): the
  answer is ``status: complete`` with the signed-in Session Token and the Account Token;
- ``{"status": "code_required", "sign_in_id": ID, "sent_to"?}`` → Frontdoor keeps a
  pending step under its own opaque ``sign_in_id`` (five minutes, five codes); the agent
  sends ``{"code"}`` to ``…/oauth/mediated/{sign_in_id}`` from the same Session;
- ``failed`` (one answer for an unknown account and a wrong password) and ``expired``.

Credential and code attempts are rate-limited per agent (client_id) and per User ID.
Field values are never stored, logged, echoed or sent anywhere but ``relay_url``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec
from frontdoor_core.errors import Unavailable
from frontdoor_core.redis_keys import shard
from frontdoor_protocol.errors import ProtocolError
from frontdoor_tenancy.issuer_settings import MediatedSettings
from joserfc import jwt

from .introspection_cache import publish_current_head
from .sign_in import allowed_scopes, complete_sign_in, requested_scopes
from .token_binding import TokenBinding
from .token_endpoint import GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_response import session_token_response

__all__ = ["RELAY_TYPE", "MediatedCaller", "MediatedSignIns", "RelayFetcher", "relay_audience"]

RELAY_TYPE = "frontdoor-mediated+jwt"
RELAY_LIFETIME_S = 60
PENDING_LIFETIME_S = 300
MAX_CODE_ATTEMPTS = 5
MAX_VALUE_CHARS = 1024
_STATUSES = {"complete", "code_required", "failed", "expired"}


class RelayFetcher(Protocol):
    """What is needed of `SafeFetcher`: one POST, no redirect followed."""

    async def post_json(self, url: str, body: bytes, *, content_type: str = ...) -> Any: ...


@dataclass(frozen=True, slots=True)
class MediatedCaller:
    """The verified caller: its Session, agent, User ID and DPoP key."""

    session_id: str
    client_id: str
    user_id: str
    jkt: str


class _Pending(msgspec.Struct, frozen=True, kw_only=True):
    relay_sign_in_id: str
    session_id: str
    client_id: str
    user_id: str
    scope: str
    expires_at: int
    attempts: int = 0


class _Answer(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    account: str | None = None
    sign_in_id: str | None = None
    sent_to: str | None = None


def relay_audience(relay_url: str) -> str:
    """The relay request's ``aud``: the origin of ``relay_url``."""
    parts = urlsplit(relay_url)
    return f"{parts.scheme}://{parts.netloc}"


def _refuse(code: str, text: str) -> GrantRefused:
    return GrantRefused(ProtocolError(code, text))


class MediatedSignIns:
    """Runs Mediated Sign-Ins for every tenant; one instance per process."""

    def __init__(self, deps: GrantDeps, fetcher: RelayFetcher) -> None:
        self._deps = deps
        self._fetcher = fetcher

    @staticmethod
    def offer(tenant: TenantIssuer) -> MediatedSettings | None:
        """The tenant's Mediated Sign-In, or None when it is off (the endpoint is then 404)."""
        m = tenant.settings.mediated
        return m if m.enabled and m.relay_url and m.fields and allowed_scopes(tenant.settings, "mediated") else None

    async def start(self, tenant: TenantIssuer, caller: MediatedCaller, payload: object) -> GrantOutcome:
        """Relay the credentials and answer the company's verdict.

        Raises:
            GrantRefused: ``invalid_request``, ``invalid_scope``, ``rate_limited``,
                ``invalid_session``, ``account_mismatch``, ``unauthorized_client``.
            Unavailable: the company's relay did not answer usably.
        """
        offer = self.offer(tenant)
        if offer is None or offer.relay_url is None:
            raise _refuse("unauthorized_client", "Mediated Sign-In is not enabled.")
        body = payload if isinstance(payload, dict) else {}
        credentials = body.get("credentials")
        declared = {f.name for f in offer.fields}
        if (not isinstance(credentials, dict) or set(credentials) != declared
                or any(not isinstance(v, str) or not v or len(v) > MAX_VALUE_CHARS for v in credentials.values())):
            raise _refuse("invalid_request", "Send exactly the declared credential fields, none empty.")
        scope_raw = body.get("scope")
        try:
            scopes = requested_scopes(scope_raw if isinstance(scope_raw, str) else None,
                                      allowed_scopes(tenant.settings, "mediated"))
        except ProtocolError as exc:
            raise GrantRefused(exc) from None
        if not scopes:
            raise _refuse("invalid_scope", "Ask for at least one scope.")
        scope = " ".join(scopes)
        await self._limit(tenant, offer, caller)
        try:
            answer = await self._relay(tenant, offer, caller, {"scope": scope, "fields": dict(credentials)})
        finally:
            credentials.clear()
        return await self._answer(tenant, caller, answer, scope)

    async def submit_code(self, tenant: TenantIssuer, caller: MediatedCaller, sign_in_id: str,
                          payload: object) -> GrantOutcome:
        """Continue a ``code_required`` sign-in with the one-time code, from the same Session.

        Raises:
            GrantRefused: ``sign_in_not_found`` (unknown, ended, or another Session's),
                ``invalid_request``, ``rate_limited``, and the refusals of `start`.
            Unavailable: the company's relay did not answer usably.
        """
        offer = self.offer(tenant)
        if offer is None or offer.relay_url is None:
            raise _refuse("unauthorized_client", "Mediated Sign-In is not enabled.")
        code = payload.get("code") if isinstance(payload, dict) else None
        if not isinstance(code, str) or not code or len(code) > MAX_VALUE_CHARS:
            raise _refuse("invalid_request", "Send the one-time code as code.")
        key = self._key(tenant, sign_in_id)
        raw = await self._deps.redis.getdel(key)  # one submission at a time
        pending = msgspec.json.decode(raw, type=_Pending) if raw else None
        if pending is None or pending.session_id != caller.session_id or pending.client_id != caller.client_id:
            if pending is not None:
                await self._keep(key, pending)
            raise _refuse("sign_in_not_found", "No such sign-in for this Session.")
        now = int(self._deps.clock().timestamp())
        if now >= pending.expires_at:
            return GrantOutcome(body={"status": "expired"}, headers={})
        await self._limit(tenant, offer, caller)
        answer = await self._relay(tenant, offer, caller, {"sign_in_id": pending.relay_sign_in_id, "code": code})
        if answer.status == "code_required":
            attempts = pending.attempts + 1
            if attempts >= MAX_CODE_ATTEMPTS:
                return GrantOutcome(body={"status": "failed"}, headers={})
            await self._keep(key, msgspec.structs.replace(pending, attempts=attempts))
            return GrantOutcome(body={"status": "code_required", "sign_in_id": sign_in_id, "code": {},
                                      "expires_at": _iso(pending.expires_at)}, headers={})
        return await self._answer(tenant, caller, answer, pending.scope)

    async def _answer(self, tenant: TenantIssuer, caller: MediatedCaller, answer: _Answer, scope: str
                      ) -> GrantOutcome:
        if answer.status in ("failed", "expired"):
            return GrantOutcome(body={"status": answer.status}, headers={})
        now_dt = self._deps.clock()
        if answer.status == "code_required":
            sign_in_id = "msi_" + secrets.token_urlsafe(24)
            expires_at = int(now_dt.timestamp()) + PENDING_LIFETIME_S
            await self._keep(self._key(tenant, sign_in_id), _Pending(
                relay_sign_in_id=answer.sign_in_id or "", session_id=caller.session_id, client_id=caller.client_id,
                user_id=caller.user_id, scope=scope, expires_at=expires_at))
            code: dict[str, str] = {"sent_to": answer.sent_to} if answer.sent_to else {}
            return GrantOutcome(body={"status": "code_required", "sign_in_id": sign_in_id, "code": code,
                                      "expires_at": _iso(expires_at)}, headers={})
        binding = TokenBinding(audience=tenant.issuer, resource=None, bearer=False, jkt=caller.jkt, one_time=None)
        async with self._deps.pool.acquire() as conn:
            try:
                done = await complete_sign_in(
                    conn, tenant_id=tenant.tenant_id, session_id=caller.session_id, client_id=caller.client_id,
                    user_id=caller.user_id, account_id=answer.account or "", granted_scope=scope,
                    sign_in_type="mediated", now=now_dt, requested_scope=scope)
            except ProtocolError as exc:
                raise GrantRefused(exc) from None
            await publish_current_head(self._deps.redis, conn, tenant.tenant_id)  # introspection sees the sign-in
            outcome = await session_token_response(conn, self._deps.keys, tenant, done.session, binding,
                                                   now=now_dt, refresh_token=done.account_token)
        return GrantOutcome(body={"status": "complete", **outcome.body}, headers=outcome.headers)

    async def _relay(self, tenant: TenantIssuer, offer: MediatedSettings, caller: MediatedCaller,
                     claims: dict[str, Any]) -> _Answer:
        """POST the signed relay request; the company's answer, validated."""
        assert offer.relay_url is not None
        now = int(self._deps.clock().timestamp())
        async with self._deps.pool.acquire() as conn:
            signer = await self._deps.keys.signer(conn, tenant.tenant_id, self._deps.clock())
        token = jwt.encode({"alg": "ES256", "typ": RELAY_TYPE, "kid": signer.kid}, {
            "iss": tenant.issuer, "aud": relay_audience(offer.relay_url), "iat": now, "exp": now + RELAY_LIFETIME_S,
            "jti": secrets.token_urlsafe(18), "sub": caller.user_id, "client_id": caller.client_id, **claims,
        }, signer.key)
        claims.clear()
        try:
            result = await self._fetcher.post_json(offer.relay_url, token.encode(), content_type="application/jwt")
            answer = msgspec.json.decode(result.body, type=_Answer)
        except Exception:  # FetchError, a malformed answer: never with the request in the message
            raise Unavailable("mediated_relay_unavailable", "The company could not check the sign-in.") from None
        finally:
            del token
        ok = answer.status in _STATUSES and (
            answer.status != "complete" or (answer.account is not None and 0 < len(answer.account) <= 255)) and (
            answer.status != "code_required" or (answer.sign_in_id is not None and 0 < len(answer.sign_in_id) <= 256))
        if not ok or (answer.sent_to is not None and len(answer.sent_to) > 100):
            raise Unavailable("mediated_relay_unavailable", "The company could not check the sign-in.")
        return answer

    async def _limit(self, tenant: TenantIssuer, offer: MediatedSettings, caller: MediatedCaller) -> None:
        t = tenant.tenant_id
        await self._deps.limit(f"med:agent:{shard(t)}:{caller.client_id}", offer.attempts_per_agent_per_minute,
                               "mediated-per-agent")
        await self._deps.limit(f"med:user:{shard(t)}:{caller.client_id}:{caller.user_id}",
                               offer.attempts_per_user_per_minute, "mediated-per-user")

    @staticmethod
    def _key(tenant: TenantIssuer, sign_in_id: str) -> str:
        return f"med:pending:{shard(tenant.tenant_id)}:{sign_in_id}"

    async def _keep(self, key: str, pending: _Pending) -> None:
        ttl = max(pending.expires_at - int(self._deps.clock().timestamp()), 1)
        await self._deps.redis.set(key, msgspec.json.encode(pending), ex=ttl)


def _iso(epoch: int) -> str:
    return (datetime(1970, 1, 1) + timedelta(seconds=epoch)).isoformat() + "Z"
