"""The token response of every grant: a Session Token for the Session (PAP §4.2, §4.4).

``token_type`` is ``DPoP`` (or ``Bearer`` for an MCP server without DPoP support),
``expires_in`` the tenant's Session lifetime, ``session_id``, ``signed_in``, ``scope``
when signed in, and ``refresh_token`` when a sign-in or rotation issued an Account Token.
The Session Token itself carries no state: introspection looks the Session up by ``sid``.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import asyncpg
from frontdoor_protocol.session_token import Confirmation, SessionTokenClaims, mint_session_token

from .session_store import SessionRecord
from .signer_cache import IssuerKeys
from .token_binding import TokenBinding
from .token_endpoint import GrantOutcome, TenantIssuer

__all__ = ["session_token_response"]


async def session_token_response(conn: asyncpg.Connection, keys: IssuerKeys, tenant: TenantIssuer,
                                 session: SessionRecord, binding: TokenBinding, *, now: datetime,
                                 refresh_token: str | None = None) -> GrantOutcome:
    """Mint the Session Token for ``session`` and build the response."""
    epoch = int(now.timestamp())
    signer = await keys.signer(conn, tenant.tenant_id, now)
    lifetime = tenant.settings.session_lifetime_s
    claims = SessionTokenClaims(
        iss=tenant.issuer, sub=session.user_id, aud=binding.audience, client_id=session.client_id, sid=session.id,
        jti=secrets.token_urlsafe(16), iat=epoch, exp=epoch + lifetime,
        cnf=Confirmation(jkt=binding.jkt) if binding.jkt else None, resource=binding.resource,
    )
    body: dict[str, Any] = {
        "access_token": mint_session_token(claims, signer.key, signer.kid),
        "token_type": "Bearer" if binding.bearer else "DPoP",
        "expires_in": lifetime,
        "session_id": session.id,
        "signed_in": session.signed_in,
    }
    if session.signed_in and session.scope:
        body["scope"] = session.scope
    if refresh_token is not None:
        body["refresh_token"] = refresh_token
    return GrantOutcome(body=body, headers=dict(binding.headers))
