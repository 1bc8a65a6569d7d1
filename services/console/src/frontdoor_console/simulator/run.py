"""A simulator run: the tenant's live configuration played by a real agent, step by step.

1. discovery: the publish check (`frontdoor_tenancy.publish_check`) of the tenant's first
   verified domain, through the SSRF-safe fetcher, with its finding codes (PAP §3, RFC 8414,
   and for PAP 1.0 tenants RFC 9728);
2. a signed-out Session at the issuer's token endpoint (PAP §4.5, PAP-4.5-01);
3. a call with it to the first API (or MCP server) listed in ``poppy.json``
   (`frontdoor_console.simulator.api_call`, PAP §6);
4. revocation of its Session Token (RFC 7009, PAP §4.9);
5. the next request with that token: a signed-out Session stays live (revoking a Session
   Token changes nothing, RFC 7009 §2.2); the refusal needs a signed-in Session (left).

A step that fails says what is wrong and where to fix it; the steps after it do not run
(an agent would stop there too).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any, Final

import asyncpg
from frontdoor_core.outbound import FetchError
from frontdoor_tenancy import domain_claims, issuer_profile, issuer_settings
from frontdoor_tenancy.publish_check import run_publish_check
from frontdoor_tenancy.scanner import doc_for

from .agent import SimulatorAgent, error_of
from .api_call import call_first_api
from .exchange import Exchange, RecordingFetcher
from .identity import SimulatorIdentity
from .step import Step, StepFinding

__all__ = ["Step", "StepFinding", "simulate"]

_AGENTS_SETTING: Final = "/agents"
_DOMAINS_SETTING: Final = "/domains"
_SETTINGS: Final = "/settings"


def _steps() -> list[Step]:
    return [Step(key="discovery", title="Discovery: poppy.json and the issuer metadata"),
            Step(key="session", title="A signed-out Session at the token endpoint"),
            Step(key="api", title="A call to your first listed API or MCP server"),
            Step(key="revoke", title="Revocation of the Session Token"),
            Step(key="refused", title="The next request with the revoked token is refused")]


def _take(http: RecordingFetcher) -> list[Exchange]:
    taken, http.exchanges = http.exchanges, []
    return taken


def _fetch_failed(step: Step, exc: FetchError) -> None:
    step.ok = False
    step.findings.append(StepFinding(code=str(exc.code), message=f"The request could not be made: {exc}",
                                     hint="Check the issuer base URL Frontdoor is configured with.",
                                     doc="issuer.md", setting=_SETTINGS))


async def _discover(conn: asyncpg.Connection, step: Step, http: RecordingFetcher, tenant_id: str, *,
                    base_url: str, now: datetime, dev: bool) -> None:
    claims = await domain_claims.list_domains(conn, tenant_id)
    verified = [c for c in claims if c.status == "verified"]
    listed = verified or claims
    if not listed:
        step.ok = False
        step.findings.append(StepFinding(
            code="no_domain", message="Your account has no domain, so no agent can discover you.",
            hint="Add your domain, verify it, and publish its poppy.json.", doc="domains.md",
            setting=_DOMAINS_SETTING, source="frontdoor"))
        return
    chosen = listed[0]
    report = await run_publish_check(conn, tenant_id, chosen.domain, fetcher=http, base_url=base_url, now=now,
                                     dev=dev)
    step.ok = report.ok
    step.summary = f"{chosen.domain}: " + ("every document agrees." if report.ok else
                                           f"{len(report.findings)} finding(s).")
    for f in report.findings:
        step.findings.append(StepFinding(
            code=f.code, message=f.message, hint=f.hint, doc=doc_for(f.code), source=f.source,
            requirement=f.requirement, setting=_DOMAINS_SETTING))


def _member(body: bytes, name: str) -> str | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    value = doc.get(name) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _token_of(body: bytes) -> str | None:
    return _member(body, "access_token")


async def simulate(conn: asyncpg.Connection, identity: SimulatorIdentity, fetcher: Any, *, tenant_id: str,
                   slug: str, base_url: str, now: datetime, dev: bool) -> list[Step]:
    """Run every step against the tenant's live configuration; the steps with their exchanges."""
    steps = _steps()
    discovery, session, api, revoke, refused = steps
    http = RecordingFetcher(fetcher)
    await _discover(conn, discovery, http, tenant_id, base_url=base_url, now=now, dev=dev)
    discovery.exchanges = _take(http)
    if not discovery.ok:
        return steps
    urls = issuer_profile.issuer_urls(base_url, slug)
    stored = await issuer_settings.get_settings(conn, tenant_id)
    if not stored.settings.protocol.serves("0.2"):
        session.ok = False
        session.findings.append(StepFinding(
            code="session_grant_not_served", source="frontdoor",
            message="Your issuer serves PAP 1.0 only; this slice of the simulator plays a PAP 0.2 Session.",
            hint="Serve 0.2 as well to run the Session steps here.", doc="pap-1.0.md", setting=_SETTINGS))
        return steps
    agent = SimulatorAgent(identity, http, now=int(now.timestamp()), user_id=f"simulator-{secrets.token_hex(4)}")
    try:
        answer = await agent.start_session(urls.issuer, urls.token_endpoint)
    except FetchError as exc:
        session.exchanges = _take(http)
        _fetch_failed(session, exc)
        return steps
    session.exchanges = _take(http)
    token = _token_of(answer.body) if answer.status == 200 else None
    if token is None:
        code = error_of(answer) or f"http_{answer.status}"
        session.ok = False
        session.findings.append(StepFinding(
            code=code, source="token endpoint", requirement="PAP-4.5-01",
            message=f"The token endpoint refused the simulator's Session ({answer.status} {code}).",
            hint="Check your agent policy lets the simulator in (its client_id is shown above) and that the "
                 "issuer serves the jwt-bearer grant.", doc="sessions.md", setting=_AGENTS_SETTING))
        return steps
    session.ok = True
    session.summary = f"Session started for User ID {agent.user_id} (signed out)."
    await call_first_api(api, agent, list(stored.settings.apis), token=token, issuer=urls.issuer,
                         token_endpoint=urls.token_endpoint, session_id=_member(answer.body, "session_id"))
    api.exchanges = _take(http)
    if api.ok is False:
        return steps
    try:
        answer = await agent.revoke(urls.issuer, urls.revocation_endpoint, token)
    except FetchError as exc:
        revoke.exchanges = _take(http)
        _fetch_failed(revoke, exc)
        return steps
    revoke.exchanges = _take(http)
    revoke.ok = answer.status == 200
    if not revoke.ok:
        revoke.findings.append(StepFinding(
            code=error_of(answer) or f"http_{answer.status}", source="revocation endpoint",
            message=f"Revocation answered {answer.status}.", hint="See the error above.", doc="sessions.md"))
        return steps
    revoke.summary = "The Session Token was revoked."
    try:
        answer = await agent.call(urls.feedback_endpoint, token, {"kind": "other", "task": "simulator check", "description": "Sent after revocation; must be refused."})
    except FetchError as exc:
        refused.exchanges = _take(http)
        _fetch_failed(refused, exc)
        return steps
    refused.exchanges = _take(http)
    found = error_of(answer)
    if answer.status == 401 and found == "invalid_token":
        refused.ok, refused.summary = True, "Refused: 401 invalid_token."
    elif answer.status == 202:
        # RFC 7009 §2.2 / PAP §4.9: revoking a Session Token changes nothing; only an Account
        # Token (a sign-in) is revoked, which needs the sign-in step (not in this slice).
        refused.summary = ("Accepted (202): a signed-out Session stays live after revocation, by design "
                           "(only an Account Token ends a sign-in). The refusal is shown once the sign-in step exists.")
    else:
        refused.ok = False
        refused.findings.append(StepFinding(
            code="unexpected_answer", source="feedback endpoint",
            message=f"The issuer answered {answer.status} {found or ''}.",
            hint="See the exchange above.", doc="sessions.md"))
    return steps
