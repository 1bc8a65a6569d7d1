"""The end of every sign-in (PAP §4.4): the Session signs in, an Account Token is issued.

Device, Direct and Mediated Sign-In differ in how the user is authenticated and
consents; they all finish with :func:`complete_sign_in`, in one transaction:

- the granted scope is checked: not empty, within what was requested and what the
  tenant allows for the sign-in type (PAP-4.4-02); a violation is ``invalid_scope``;
- the Session must be a live Session of the same client_id and User ID
  (``invalid_session``), and never signed in to another account, even if it is signed
  out now (``account_mismatch``, PAP-4.8-04); ``bound_account`` is set once;
- a ``sign_ins`` row (the token family) and the first Account Token (hashed) are stored
  and a ``session.signed_in`` event is written; the row says which login vouched for the
  account (``login_via``, `LoginVia`) and the IdP session, if any (``idp_session``), for
  Back-Channel Logout (`frontdoor_sessions.oidc_backchannel_logout`);
- the token's value is returned once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.scopes import format_scope, parse_scope
from frontdoor_tenancy.issuer_settings import IssuerSettings, get_settings

from . import session_store
from .account_tokens import insert_account_token
from .record_ids import new_record_id
from .session_events import record_event
from .session_store import SessionRecord

__all__ = [
    "SignInResult",
    "SignInType",
    "DelegatedSignIn",
    "LoginVia",
    "allowed_scopes",
    "complete_delegated_sign_in",
    "complete_sign_in",
    "requested_scopes",
    "sign_in_session_or_refuse",
]

SignInType = Literal["device", "direct", "mediated"]
LoginVia = Literal["oidc", "handoff", "mediated"]
"""Which login vouched for a sign-in's account: the tenant's ``oidc`` connection, the signed
login ``handoff``, or the company's servers (``mediated``). Kept as ``sign_ins.login_via``;
NULL there for a sign-in made before it was kept, or one whose flow did not say."""


def _login_via(sign_in_type: SignInType, login_via: str | None, idp_session: str | None) -> LoginVia | None:
    """What ``sign_ins.login_via`` says: Mediated Sign-In is always ``mediated``, an IdP session ``oidc``."""
    if sign_in_type == "mediated":
        return "mediated"
    if idp_session:
        return "oidc"
    if login_via == "oidc":
        return "oidc"
    if login_via == "handoff":
        return "handoff"
    return None  # not said (a flow started before the issuer carried it): may be OIDC


class SignInResult(msgspec.Struct, frozen=True, kw_only=True):
    """A completed sign-in.

    Attributes:
        sign_in_id: The new family (``sgn_...``).
        session: The Session, now signed in.
        scope: The granted scope (space-separated).
        account_token: The Account Token's value: give it to the agent once, never log it.
    """

    sign_in_id: str
    session: SessionRecord
    scope: str
    account_token: str


def allowed_scopes(settings: IssuerSettings, sign_in_type: str) -> tuple[str, ...]:
    """Scopes the tenant lets this sign-in type grant; empty when the type is off."""
    offer = getattr(settings, sign_in_type, None)
    if offer is None or not getattr(offer, "enabled", False):
        return ()
    known = settings.all_scopes()
    return tuple(s for s in getattr(offer, "scopes", ()) if s in known)


def requested_scopes(raw: str | None, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The ``scope`` of a sign-in request, checked against ``allowed`` (PAP-4.4-02/03).

    Raises:
        ProtocolError: ``invalid_request`` when missing, ``invalid_scope`` when malformed
            or asking for a scope the type does not offer.
    """
    if raw is None:
        raise ProtocolError("invalid_request", "scope is required.")
    try:
        wanted = parse_scope(raw)
    except ValueError:
        raise ProtocolError("invalid_scope", "scope is not a space-separated list of scopes.") from None
    if any(s not in allowed for s in wanted):
        raise ProtocolError("invalid_scope", "A requested scope is not offered for this sign-in type.")
    return wanted


def _granted(granted_scope: str, allowed: tuple[str, ...], requested: tuple[str, ...] | None) -> str:
    try:
        granted = parse_scope(granted_scope)
    except ValueError:
        raise ProtocolError("invalid_scope", "Nothing was granted.") from None
    if any(s not in allowed for s in granted) or (requested is not None and any(s not in requested for s in granted)):
        raise ProtocolError("invalid_scope", "More was granted than requested and allowed.")
    return format_scope(granted)


async def sign_in_session_or_refuse(conn: asyncpg.Connection, tenant_id: str, session: SessionRecord, *,
                                    account_id: str, scope: str, sign_in_id: str, now: datetime) -> SessionRecord:
    """Sign ``session`` in, or raise ``invalid_session`` / ``account_mismatch``.

    The update is a compare-and-set on ``bound_account``; nothing is changed on refusal.
    A ``session.signed_in`` event is written when the Session's sign-in or scope changed.
    """
    if session.bound_account is not None and session.bound_account != account_id:
        raise ProtocolError("account_mismatch", "This Session was signed in to another account.")
    updated = await session_store.sign_in_session(conn, tenant_id, session.id, account_id=account_id, scope=scope,
                                                  sign_in_id=sign_in_id, now=now)
    if updated is None:
        current = await session_store.find_session(conn, tenant_id, session.id)
        if current is None or not current.live:
            raise ProtocolError("invalid_session", "The Session has ended.")
        raise ProtocolError("account_mismatch", "This Session was signed in to another account.")
    if session.signed_in and session.sign_in_id == sign_in_id and session.scope == scope:
        return updated  # a refresh that changed nothing the webhooks report
    await record_event(conn, tenant_id, "session.signed_in", {
        "session_id": updated.id, "client_id": updated.client_id, "user_id": updated.user_id,
        "account": account_id, "scope": scope, "sign_in_id": sign_in_id,
    }, now=now)
    return updated


async def complete_sign_in(conn: asyncpg.Connection, *, tenant_id: str, session_id: str, client_id: str,
                           user_id: str | None, account_id: str, granted_scope: str, sign_in_type: SignInType,
                           now: datetime, requested_scope: str | None = None,
                           idp_session: str | None = None, login_via: str | None = None) -> SignInResult:
    """Sign the Session in and issue the first Account Token of a new sign-in.

    Runs in its own transaction (a savepoint inside the caller's, if any).

    Args:
        user_id: The User ID the flow is for; None when the flow did not learn one
            (Device Sign-In starts without a Session): the Session's own is used.
        requested_scope: What the agent asked for, when the caller has it; the grant
            must stay within it.
        idp_session: The `idp_session_hash` of the IdP session the user signed in with
            (an ``oidc`` login whose ID token named a ``sid``): a logout token naming it
            revokes this sign-in (Back-Channel Logout 1.0).
        login_via: Which login vouched for ``account_id`` (`LoginVia`: ``oidc`` or
            ``handoff``; ``mediated`` is implied by the type). Unknown (None): a
            Back-Channel Logout of the account treats it as possibly OIDC.

    Raises:
        ProtocolError: ``invalid_scope``, ``invalid_session``, ``account_mismatch``,
            ``unauthorized_client`` (the type is off).
    """
    if not account_id or len(account_id) > 255:
        raise ValueError("account_id must be 1 to 255 characters")
    async with conn.transaction():
        settings = (await get_settings(conn, tenant_id)).settings
        allowed = allowed_scopes(settings, sign_in_type)
        if not allowed:
            raise ProtocolError("unauthorized_client", "This sign-in type is not enabled.")
        requested = parse_scope(requested_scope) if requested_scope else None
        scope = _granted(granted_scope, allowed, requested)
        session = await session_store.find_session(conn, tenant_id, session_id)
        if (session is None or not session.live or session.client_id != client_id
                or (user_id is not None and session.user_id != user_id)):
            raise ProtocolError("invalid_session", "The session_id does not name a live Session of this user.")
        if session.bound_account is not None and session.bound_account != account_id:
            raise ProtocolError("account_mismatch", "This Session was signed in to another account.")
        sign_in_id = new_record_id("sgn")
        await conn.execute(
            "INSERT INTO sign_ins (tenant_id, id, client_id, user_id, account_id, scope, type, created_at, idp_session,"
            " login_via) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            tenant_id, sign_in_id, client_id, session.user_id, account_id, scope, sign_in_type, now, idp_session or None,
            _login_via(sign_in_type, login_via, idp_session),
        )
        signed = await sign_in_session_or_refuse(conn, tenant_id, session, account_id=account_id, scope=scope,
                                                 sign_in_id=sign_in_id, now=now)
        _, value = await insert_account_token(conn, tenant_id, sign_in_id=sign_in_id, client_id=client_id,
                                              user_id=session.user_id, account_id=account_id, scope=scope, now=now)
    return SignInResult(sign_in_id=sign_in_id, session=signed, scope=scope, account_token=value)


class DelegatedSignIn(msgspec.Struct, frozen=True, kw_only=True):
    """A completed 1.0 sign-in: a grant family with no Session (ADR 0004 §4, [S §5]).

    Attributes:
        sign_in_id: The family (``sgn_...``): the ``sgn`` of every access token it issues.
        account_id: The company's account the user signed in to.
        scope: The granted scope (space-separated).
        account_token: The refresh token's value: give it to the agent once, never log it.
    """

    sign_in_id: str
    client_id: str
    account_id: str
    scope: str
    account_token: str


async def complete_delegated_sign_in(conn: asyncpg.Connection, *, tenant_id: str, client_id: str, account_id: str,
                                     granted_scope: str, sign_in_type: SignInType, now: datetime,
                                     requested_scope: str | None = None,
                                     idp_session: str | None = None, login_via: str | None = None) -> DelegatedSignIn:
    """Record a 1.0 sign-in and issue its first Account Token (refresh token).

    In 1.0 sign-in is independent of Session identity [S §5]: no Session is signed in,
    no User ID is recorded and ``account_mismatch`` does not exist [Q6]. The Sessions
    that later present an access token of this family are paired with it at
    ``session-state`` (`delegated_sessions`). ``idp_session`` and ``login_via`` as for `complete_sign_in`.

    Raises:
        ProtocolError: ``invalid_scope``, ``unauthorized_client`` (the type is off).
    """
    if not account_id or len(account_id) > 255:
        raise ValueError("account_id must be 1 to 255 characters")
    async with conn.transaction():
        settings = (await get_settings(conn, tenant_id)).settings
        allowed = allowed_scopes(settings, sign_in_type)
        if not allowed:
            raise ProtocolError("unauthorized_client", "This sign-in type is not enabled.")
        requested = parse_scope(requested_scope) if requested_scope else None
        scope = _granted(granted_scope, allowed, requested)
        sign_in_id = new_record_id("sgn")
        await conn.execute(
            "INSERT INTO sign_ins (tenant_id, id, client_id, user_id, account_id, scope, type, created_at, profile,"
            " idp_session, login_via) VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, '1.0', $8, $9)",
            tenant_id, sign_in_id, client_id, account_id, scope, sign_in_type, now, idp_session or None,
            _login_via(sign_in_type, login_via, idp_session),
        )
        _, value = await insert_account_token(conn, tenant_id, sign_in_id=sign_in_id, client_id=client_id,
                                              user_id=None, account_id=account_id, scope=scope, now=now)
    return DelegatedSignIn(sign_in_id=sign_in_id, client_id=client_id, account_id=account_id, scope=scope,
                           account_token=value)
