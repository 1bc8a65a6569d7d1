"""A simulator run: the tenant's live configuration played by a real agent, step by step.

1. discovery: the publish check (`frontdoor_tenancy.publish_check`) of the tenant's first
   verified domain, through the SSRF-safe fetcher, with its finding codes (PAP §3, RFC 8414,
   and for PAP 1.0 tenants RFC 9728);
2. a signed-out Session at the issuer's token endpoint (PAP §4.5, PAP-4.5-01);
3. a call with it to the first API (or MCP server) listed in ``poppy.json``
   (`frontdoor_console.simulator.api_call`, PAP §6);
4. Device Sign-In (`frontdoor_console.simulator.sign_in`, PAP §4.6), else Direct Sign-In
   (PAP §4.5): the run `simulate` starts stops here with a `SignInWait`, the admin signs in
   as a test user in another tab, and `resume` polls (each continue of the page, at the
   issuer's interval) until the Account Token is granted, or `redeem` takes the code the
   browser brings back to the simulator's callback;
5. an operation (`frontdoor_console.simulator.operation`, Operations extension v1), only when
   the admin ticked it for the run (`PendingRun.include_operation`: it calls the company's real
   perform webhook): a test operation proposed in the ledger on the company's behalf, read and
   confirmed by the agent at the operations endpoint, the perform webhook's delivery and
   outcome shown; not chosen, the step is informational and nothing is proposed;
6. revocation of that Account Token (RFC 7009, PAP §4.9): its sign-in ends;
7. the next request with it, a refresh, is refused (``400 invalid_grant``).

A step that fails says what is wrong and where to fix it; the steps after it do not run
(an agent would stop there too).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any, Final

import asyncpg
from frontdoor_core.outbound import FetchError
from frontdoor_tenancy import domain_claims, issuer_profile, issuer_settings
from frontdoor_tenancy.publish_check import run_publish_check
from frontdoor_tenancy.scanner import doc_for

from .agent import SimulatorAgent, error_of, json_of
from .api_call import call_first_api
from .exchange import Exchange, RecordingFetcher
from .identity import SimulatorIdentity
from .operation import not_chosen, run_operation
from .pending import PendingRun, SignInWait, expired
from .sign_in import DeviceStart, judge_poll, judge_redemption, start_sign_in
from .step import Step, StepFinding

__all__ = ["Step", "StepFinding", "redeem", "resume", "simulate"]

DIRECT_WAIT_S: Final = 600
"""How long a Direct Sign-In waits for the browser to come back."""

_AGENTS_SETTING: Final = "/agents"
_DOMAINS_SETTING: Final = "/domains"
_SETTINGS: Final = "/settings"


def _steps() -> list[Step]:
    return [Step(key="discovery", title="Discovery: poppy.json and the issuer metadata"),
            Step(key="session", title="A signed-out Session at the token endpoint"),
            Step(key="api", title="A call to your first listed API or MCP server"),
            Step(key="signin", title="Device Sign-In at your login page"),
            Step(key="operation", title="An operation proposed, approved and performed by your webhook"),
            Step(key="revoke", title="Revocation of the Account Token"),
            Step(key="refused", title="The next request with the revoked Account Token is refused")]


_KEPT_POLLS = 3
"""A waiting sign-in step shows its first requests and the latest polls only."""


def _take(http: RecordingFetcher) -> list[Exchange]:
    taken, http.exchanges = http.exchanges, []
    return taken


def _fetch_failed(step: Step, exc: FetchError) -> None:
    step.fail(StepFinding(code=str(exc.code), message=f"The request could not be made: {exc}",
                          hint="Check the issuer base URL Frontdoor is configured with.",
                          doc="issuer.md", setting=_SETTINGS))


async def _discover(conn: asyncpg.Connection, step: Step, http: RecordingFetcher, tenant_id: str, *,
                    base_url: str, now: datetime, dev: bool) -> str:
    """The publish check of the first verified domain into ``step``; that domain ("" when none)."""
    claims = await domain_claims.list_domains(conn, tenant_id)
    verified = [c for c in claims if c.status == "verified"]
    listed = verified or claims
    if not listed:
        step.fail(StepFinding(
            code="no_domain", message="Your account has no domain, so no agent can discover you.",
            hint="Add your domain, verify it, and publish its poppy.json.", doc="domains.md",
            setting=_DOMAINS_SETTING, source="frontdoor"))
        return ""
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
    return str(chosen.domain)


def _member(body: bytes, name: str) -> str | None:
    doc = json_of(body)
    value = doc.get(name) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _token_of(body: bytes) -> str | None:
    return _member(body, "access_token")


async def simulate(conn: asyncpg.Connection, identity: SimulatorIdentity, fetcher: Any, *, tenant_id: str,
                   slug: str, base_url: str, now: datetime, dev: bool, run_id: str
                   ) -> tuple[list[Step], SignInWait | None]:
    """Run the steps up to the sign-in; the steps, and what the run waits with when it waits for it."""
    steps = _steps()
    discovery, session, api, signin, *_ = steps
    http = RecordingFetcher(fetcher)
    domain = await _discover(conn, discovery, http, tenant_id, base_url=base_url, now=now, dev=dev)
    discovery.exchanges = _take(http)
    if not discovery.ok:
        return steps, None
    urls = issuer_profile.issuer_urls(base_url, slug)
    stored = await issuer_settings.get_settings(conn, tenant_id)
    if not stored.settings.protocol.serves("0.2"):
        session.fail(StepFinding(
            code="session_grant_not_served", source="frontdoor",
            message="Your issuer serves PAP 1.0 only; this slice of the simulator plays a PAP 0.2 Session.",
            hint="Serve 0.2 as well to run the Session steps here.", doc="pap-1.0.md", setting=_SETTINGS))
        return steps, None
    agent = SimulatorAgent(identity, http, now=int(now.timestamp()), user_id=f"simulator-{secrets.token_hex(4)}")
    try:
        answer = await agent.start_session(urls.issuer, urls.token_endpoint)
    except FetchError as exc:
        session.exchanges = _take(http)
        _fetch_failed(session, exc)
        return steps, None
    session.exchanges = _take(http)
    token = _token_of(answer.body) if answer.status == 200 else None
    session_id = _member(answer.body, "session_id")
    if token is None or session_id is None:
        code = error_of(answer) or f"http_{answer.status}"
        session.fail(StepFinding(
            code=code, source="token endpoint", requirement="PAP-4.5-01",
            message=f"The token endpoint refused the simulator's Session ({answer.status} {code}).",
            hint="Check your agent policy lets the simulator in (its client_id is shown above) and that the "
                 "issuer serves the jwt-bearer grant.", doc="sessions.md", setting=_AGENTS_SETTING))
        return steps, None
    session.ok = True
    session.summary = f"Session started for User ID {agent.user_id} (signed out)."
    await call_first_api(api, agent, list(stored.settings.apis), token=token, issuer=urls.issuer,
                         token_endpoint=urls.token_endpoint, session_id=session_id)
    api.exchanges = _take(http)
    if api.ok is False:
        return steps, None
    try:
        started = await start_sign_in(signin, agent, issuer=urls.issuer, metadata_url=urls.metadata,
                                      device_scopes=list(stored.settings.device.scopes),
                                      direct_scopes=list(stored.settings.direct.scopes),
                                      redirect_uri=identity.redirect_uri, run_id=run_id)
    except FetchError as exc:
        signin.exchanges = _take(http)
        _fetch_failed(signin, exc)
        return steps, None
    signin.exchanges = _take(http)
    if started is None:
        return steps, None
    at = int(now.timestamp())
    wait = SignInWait(user_id=agent.user_id, session_id=session_id, session_token=token,
                      dpop_jwk=agent.dpop_private_jwk(), dpop_nonce=agent.nonce, company_domain=domain,
                      interval=5, expires_at=at + DIRECT_WAIT_S, next_poll_at=at + 5)
    if isinstance(started, DeviceStart):
        signin.summary = "Waiting for you to sign in as a test user (open the link below in a new tab)."
        wait.device, wait.interval = started, max(1, started.interval)
        wait.expires_at, wait.next_poll_at = at + started.expires_in, at + wait.interval
    else:
        signin.title = "Direct Sign-In at your login page"
        signin.summary = ("Your issuer offers Direct Sign-In (no Device Sign-In): open the authorization link below "
                          "in a new tab and sign in as a test user; your browser comes back to the simulator.")
        wait.direct = started
    return steps, wait


async def resume(conn: asyncpg.Connection, run: PendingRun, identity: SimulatorIdentity, fetcher: Any, *, slug: str,
                 base_url: str, ledger_base_url: str, now: datetime) -> bool:
    """Go on with a run waiting for its sign-in: poll once if due; True when the run is over.

    Never polls before the interval the issuer set (RFC 8628 §3.5), so pressing continue
    early, or the page's own poll, never earns a ``slow_down``; one that comes anyway adds
    5 s to the interval, as the issuer does.
    """
    steps, wait = run.steps, run.wait
    signin = next(s for s in steps if s.key == "signin")
    at = int(now.timestamp())
    if expired(wait, now):
        signin.fail(StepFinding(
            code="expired_token" if wait.device is not None else "sign_in_not_finished", source="simulator",
            requirement="PAP-4.6" if wait.device is not None else "PAP-4.5",
            message="The sign-in was not finished before its time ran out.",
            hint="Run the simulator again and finish signing in within the time shown.",
            doc="sign-in.md#device-sign-in-as-the-user-sees-it"))
        return True
    if wait.device is None or at < wait.next_poll_at:
        return False  # a Direct Sign-In ends at the callback (`redeem`), not here
    http = RecordingFetcher(fetcher)
    agent = SimulatorAgent(identity, http, now=at, user_id=wait.user_id, dpop_jwk=wait.dpop_jwk,
                           nonce=wait.dpop_nonce)
    urls = issuer_profile.issuer_urls(base_url, slug)
    try:
        answer = await agent.poll_device(urls.issuer, urls.token_endpoint, wait.device.device_code,
                                         wait.session_id)
    except FetchError as exc:
        signin.exchanges += _take(http)
        _fetch_failed(signin, exc)
        return True
    wait.polls += 1
    wait.dpop_nonce = agent.nonce
    first = [x for x in signin.exchanges if not x.request_body.startswith("grant_type=")]
    polls = [x for x in signin.exchanges if x.request_body.startswith("grant_type=")]
    signin.exchanges = first + (polls + _take(http))[-_KEPT_POLLS:]
    outcome = judge_poll(signin, answer)
    if outcome.pending:
        if outcome.slow_down:
            wait.interval += 5
        wait.next_poll_at = at + wait.interval
        signin.summary = (f"Waiting for you to sign in as a test user: {wait.polls} poll(s) so far, the issuer "
                          "answers authorization_pending until the sign-in is allowed.")
        return False
    if outcome.granted is None:
        return True
    await _signed_in(conn, run, agent, outcome.granted, slug=slug, base_url=base_url,
                     ledger_base_url=ledger_base_url, now=now)
    return True


async def redeem(conn: asyncpg.Connection, run: PendingRun, identity: SimulatorIdentity, fetcher: Any, *,
                 slug: str, base_url: str, ledger_base_url: str, now: datetime, params: dict[str, str]) -> None:
    """A Direct Sign-In's return to the simulator's callback (its ``state`` already matched): the run goes to its end.

    RFC 9207: ``iss`` must be the issuer's; an ``error`` is the step's finding; else the code is
    redeemed once (the ``authorization_code`` grant with the PKCE verifier and ``session_id``).
    """
    signin = next(s for s in run.steps if s.key == "signin")
    wait, urls = run.wait, issuer_profile.issuer_urls(base_url, slug)
    assert wait.direct is not None
    if params.get("iss") != urls.issuer:
        signin.fail(StepFinding(
            code="iss_mismatch", source="authorization endpoint", requirement="RFC 9207",
            message="The redirect back did not carry your issuer's iss, so an agent must not redeem its code.",
            hint="See sign-in.md.", doc="sign-in.md#turning-it-on"))
        return
    if "code" not in params:
        code = params.get("error") or "no_code"
        signin.fail(StepFinding(
            code=code, source="authorization endpoint", requirement="PAP-4.5",
            message=f"The sign-in came back without a code ({code}).",
            hint="Run the simulator again and allow access on the consent page.",
            doc="sign-in.md#turning-it-on", setting=_SETTINGS))
        return
    http = RecordingFetcher(fetcher)
    agent = SimulatorAgent(identity, http, now=int(now.timestamp()), user_id=wait.user_id, dpop_jwk=wait.dpop_jwk,
                           nonce=wait.dpop_nonce)
    try:
        answer = await agent.token(urls.issuer, urls.token_endpoint, {
            "grant_type": "authorization_code", "code": params["code"], "code_verifier": wait.direct.verifier,
            "redirect_uri": wait.direct.redirect_uri, "session_id": wait.session_id})
    except FetchError as exc:
        signin.exchanges += _take(http)
        _fetch_failed(signin, exc)
        return
    signin.exchanges += _take(http)
    granted = judge_redemption(signin, answer)
    if granted is not None:
        await _signed_in(conn, run, agent, granted, slug=slug, base_url=base_url, ledger_base_url=ledger_base_url,
                         now=now)


async def _signed_in(conn: asyncpg.Connection, run: PendingRun, agent: SimulatorAgent, granted: dict[str, Any], *,
                     slug: str, base_url: str, ledger_base_url: str, now: datetime) -> None:
    """Steps 5–7 once the Account Token is granted: the operation, revocation, the refusal."""
    signin, operation, revoke, refused = (next(s for s in run.steps if s.key == k)
                                          for k in ("signin", "operation", "revoke", "refused"))
    http, wait, urls = agent.http, run.wait, issuer_profile.issuer_urls(base_url, slug)
    signed = granted.get("session_id")
    session_id = signed if isinstance(signed, str) else wait.session_id  # the signed-in Session
    signin.ok = True
    signin.summary = (f"Signed in: Session {session_id}, scope {granted.get('scope', '')!s}; the Session Token "
                      "and Account Token are shown redacted.")
    token = granted["access_token"]
    if not run.include_operation:  # the perform webhook is the company's real one: only when chosen
        not_chosen(operation)
        await _sign_out(revoke, refused, agent, urls=urls, granted=granted, session_id=session_id)
        return
    try:
        await run_operation(operation, agent, conn, tenant_id=run.tenant_id, session_id=session_id, token=token,
                            endpoint=f"{ledger_base_url}/{slug}/operations", run_id=run.run_id, now=now)
    except FetchError as exc:
        _fetch_failed(operation, exc)
    operation.exchanges = _take(http) + operation.exchanges  # the agent's requests, then the webhook's attempts
    if operation.ok is False:
        return
    await _sign_out(revoke, refused, agent, urls=urls, granted=granted, session_id=session_id)


async def _sign_out(revoke: Step, refused: Step, agent: SimulatorAgent, *, urls: issuer_profile.IssuerUrls,
                    granted: dict[str, Any], session_id: str) -> None:
    """Steps 5–6: revoke the Account Token, then find it refused."""
    http = agent.http
    account_token = granted.get("refresh_token")
    if not isinstance(account_token, str):
        revoke.fail(StepFinding(
            code="no_account_token", source="token endpoint", requirement="PAP-4.6",
            message="The sign-in answered no refresh_token (the Account Token), so there is nothing to revoke.",
            hint="See the sign-in's exchange above.", doc="sessions.md#revocation"))
        return
    try:
        answer = await agent.revoke(urls.issuer, urls.revocation_endpoint, account_token, hint="refresh_token")
    except FetchError as exc:
        revoke.exchanges = _take(http)
        _fetch_failed(revoke, exc)
        return
    revoke.exchanges = _take(http)
    revoke.ok = answer.status == 200
    if not revoke.ok:
        revoke.findings.append(StepFinding(
            code=error_of(answer) or f"http_{answer.status}", source="revocation endpoint",
            message=f"Revocation answered {answer.status}.", hint="See the error above.", doc="sessions.md#revocation"))
        return
    revoke.summary = "The Account Token was revoked: its sign-in ended, its Session goes on signed out."
    try:
        answer = await agent.refresh(urls.issuer, urls.token_endpoint, account_token, session_id)
    except FetchError as exc:
        refused.exchanges = _take(http)
        _fetch_failed(refused, exc)
        return
    refused.exchanges = _take(http)
    found = error_of(answer)
    if answer.status == 400 and found == "invalid_grant":
        refused.ok, refused.summary = True, "Refused: 400 invalid_grant (the sign-in was revoked)."
        return
    refused.fail(StepFinding(
        code="revoked_token_accepted" if answer.status == 200 else (found or f"http_{answer.status}"),
        source="token endpoint", requirement="PAP-4.9",
        message=f"A refresh with the revoked Account Token answered {answer.status} {found or ''}.",
        hint="See the exchange above.", doc="sessions.md#revocation"))
