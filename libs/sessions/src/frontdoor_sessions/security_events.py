"""Security Event Tokens (RFC 8417) with CAEP events, from ``session_events`` rows (ADR 0005).

The mapping, one CAEP event per row:

| ``session_events`` type | CAEP event | subject (``sub_id``, RFC 9493 complex) | event members |
| --- | --- | --- | --- |
| ``session.ended`` (dashboard revoke, 0.2 and 1.0) | ``session-revoked`` | ``session`` + ``application`` | ``reason_admin`` |
| ``agent.blocked`` (its Sessions ended) | ``session-revoked`` | ``application`` (every Session of the agent) | ``reason_admin`` |
| ``session.signed_out`` (sign-out, disconnect, revocation) | ``token-claims-change`` | ``session`` + ``application`` | ``claims: {signed_in: false}`` |
| ``session.signed_in`` (sign-in, scope narrowed on refresh) | ``token-claims-change`` | ``session`` + ``application`` | ``claims: {signed_in: true, account, scope}`` |
| ``account.revoked`` (a grant family ended: RFC 7009, disconnect) | ``credential-change`` (``change_type: revoke``) | ``application`` + ``user`` (the sign-in ``sgn``) | ``credential_type: "x-frontdoor-sign-in"``, ``account`` |
| ``agent.policy_changed`` | ``token-claims-change`` | ``tenant`` | ``claims: {agent_policy: "changed"}`` |

Each SET: header ``{"alg": "ES256", "typ": "secevent+jwt", "kid"}``; claims ``iss`` (the
tenant's issuer), ``aud`` (the stream ID), ``jti`` (the event ID), ``iat``, ``sub_id``,
``events`` (exactly one), and ``seq``: the event's place in the tenant's stream (dense,
commit order), so a receiver that applied ``seq`` n has seen every event up to n.
Payloads carry identifiers only, never a token.
"""

from __future__ import annotations

from typing import Any, Final

from joserfc import jwt
from joserfc.jwk import ECKey

from .ssf_stream import StoredEvent

__all__ = ["CAEP", "EVENTS_SUPPORTED", "SET_TYPE", "event_claims", "sign_set"]

SET_TYPE: Final = "secevent+jwt"
CAEP: Final = "https://schemas.openid.net/secevent/caep/event-type/"
SESSION_REVOKED: Final = CAEP + "session-revoked"
TOKEN_CLAIMS_CHANGE: Final = CAEP + "token-claims-change"
CREDENTIAL_CHANGE: Final = CAEP + "credential-change"
EVENTS_SUPPORTED: Final = (SESSION_REVOKED, TOKEN_CLAIMS_CHANGE, CREDENTIAL_CHANGE)


def _app(client_id: str) -> dict[str, str]:
    return {"format": "uri", "uri": client_id}


def _session_subject(p: dict[str, Any]) -> dict[str, Any]:
    return {"format": "complex", "session": {"format": "opaque", "id": p["session_id"]},
            "application": _app(p["client_id"])}


def _reason(text: str) -> dict[str, str]:
    return {"en": text}


def event_claims(event: StoredEvent) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(sub_id, events)`` for one row; ``None`` for a type the stream does not carry."""
    p = event.payload
    at = int(event.created_at.timestamp())
    if event.type == "session.ended":
        return _session_subject(p), {SESSION_REVOKED: {
            "event_timestamp": at, "initiating_entity": "admin", "reason_admin": _reason(str(p.get("reason", "")))}}
    if event.type == "agent.blocked":
        return {"format": "complex", "application": _app(p["client_id"])}, {SESSION_REVOKED: {
            "event_timestamp": at, "initiating_entity": "admin", "reason_admin": _reason("agent_blocked")}}
    if event.type == "session.signed_out":
        return _session_subject(p), {TOKEN_CLAIMS_CHANGE: {
            "event_timestamp": at, "claims": {"signed_in": False},
            "reason_admin": _reason(str(p.get("reason", "")))}}
    if event.type == "session.signed_in":
        return _session_subject(p), {TOKEN_CLAIMS_CHANGE: {
            "event_timestamp": at, "claims": {"signed_in": True, "account": p["account"], "scope": p["scope"]}}}
    if event.type == "account.revoked":
        return {"format": "complex", "application": _app(p["client_id"]),
                "user": {"format": "opaque", "id": p["sign_in_id"]}}, {CREDENTIAL_CHANGE: {
            "event_timestamp": at, "change_type": "revoke", "credential_type": "x-frontdoor-sign-in",
            "account": p.get("account"), "reason_admin": _reason(str(p.get("reason", "")))}}
    if event.type == "agent.policy_changed":
        return {"format": "complex", "tenant": {"format": "opaque", "id": event.payload.get("tenant_id", "")}}, {
            TOKEN_CLAIMS_CHANGE: {"event_timestamp": at, "claims": {"agent_policy": "changed"}}}
    return None


def sign_set(event: StoredEvent, *, issuer: str, audience: str, key: ECKey, kid: str, now: int) -> str | None:
    """The SET for ``event`` on the stream ``audience``, signed by the tenant's issuer key."""
    claims = event_claims(event)
    if claims is None:
        return None
    sub_id, events = claims
    return jwt.encode({"alg": "ES256", "typ": SET_TYPE, "kid": kid}, {
        "iss": issuer, "aud": audience, "jti": event.id, "iat": now, "sub_id": sub_id, "events": events,
        "seq": event.seq,
    }, key)
