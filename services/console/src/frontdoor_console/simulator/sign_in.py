"""The simulator's sign-in, as any agent plays it: Device Sign-In (PAP §4.6, RFC 8628), else
Direct Sign-In (PAP §4.5, RFC 6749 §4.1 with PKCE, RFC 7636, and RFC 9207 ``iss``).

Device Sign-In, when the issuer's metadata names a ``device_authorization_endpoint``:

1. read the endpoints in the issuer's metadata (RFC 8414; neither Device nor Direct Sign-In
   offered: the step is informational, with a finding saying how to turn one on, and the
   run ends there);
2. ``POST`` it client-authenticated with the scopes the tenant offers for Device Sign-In
   (RFC 8628 §3.1); the answer's links must be on the issuer's host or one of its
   ``poppy_domains`` before the page shows them (PAP-4.6-02);
3. the admin opens the link in a new tab and signs in as a test user at the company's real
   login page; meanwhile the run polls the ``device_code`` grant at the interval the issuer
   set (RFC 8628 §3.4, §3.5: never before it, ``slow_down`` adds 5 s) until the sign-in is
   granted, denied (``access_denied``) or expires (``expired_token``).

Direct Sign-In, when only an ``authorization_endpoint`` is offered: the page shows the
authorization URL (``S256`` challenge, a ``state`` carrying the run's ID and 192 random bits,
``redirect_uri`` the simulator's ``{console}/simulator/{slug}/callback``, one of its CIMD's
``redirect_uris``); the admin opens it, signs in, and the browser comes back to that
callback, which checks ``state`` and ``iss`` and redeems the code once (`redeem_code`).

The device code, the PKCE verifier, the tokens and the DPoP key never reach the page: they
wait in `frontdoor_console.simulator.pending`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import msgspec
from frontdoor_core.outbound import FetchResult

from .agent import SimulatorAgent, error_of, json_of
from .step import Step, StepFinding

__all__ = ["DeviceStart", "DirectStart", "PollOutcome", "judge_poll", "judge_redemption", "start_sign_in"]

_SETTINGS: Final = "/settings"
_PENDING: Final = frozenset({"authorization_pending", "slow_down"})


class DeviceStart(msgspec.Struct, frozen=True, kw_only=True):
    """The issuer's answer to the device authorization request (``device_code`` is secret)."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    interval: int
    expires_in: int


class DirectStart(msgspec.Struct, frozen=True, kw_only=True):
    """A Direct Sign-In begun: the URL to open, and what the redemption needs (``verifier`` is secret)."""

    authorize_url: str
    state: str
    verifier: str
    redirect_uri: str


class PollOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One poll: ``granted`` with the token response, or still ``pending``, or over (a finding in the step)."""

    granted: dict[str, Any] | None = None
    pending: bool = False
    slow_down: bool = False


def _host_allowed(url: str, issuer: str, domains: list[str]) -> bool:
    """PAP-4.6-02: the link's host is the issuer's or a ``poppy_domains`` one, or a subdomain of either."""
    host = (urlsplit(url).hostname or "").lower()
    allowed = [(urlsplit(issuer).hostname or "").lower(), *(d.lower() for d in domains)]
    return bool(host) and any(host == a or host.endswith("." + a) for a in allowed if a)


def _refused(step: Step, answer: FetchResult, what: str, hint: str) -> None:
    code = error_of(answer) or f"http_{answer.status}"
    step.fail(StepFinding(code=code, source="device authorization endpoint", requirement="PAP-4.6",
                          message=f"{what} ({answer.status} {code}).", hint=hint, doc="sign-in.md#turning-it-on",
                          setting=_SETTINGS))


async def start_sign_in(step: Step, agent: SimulatorAgent, *, issuer: str, metadata_url: str,
                        device_scopes: list[str], direct_scopes: list[str], redirect_uri: str, run_id: str
                        ) -> DeviceStart | DirectStart | None:
    """Device Sign-In when offered, else Direct Sign-In; None with the step's finding when neither can start."""
    meta = json_of((await agent.http.fetch(metadata_url)).body)
    meta = meta if isinstance(meta, dict) else {}
    endpoint = meta.get("device_authorization_endpoint")
    if isinstance(endpoint, str) and endpoint:
        return await _start_device(step, agent, meta, issuer=issuer, endpoint=endpoint, scopes=device_scopes)
    authorize = meta.get("authorization_endpoint")
    if isinstance(authorize, str) and authorize:
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        state = f"{run_id}~{secrets.token_urlsafe(24)}"
        query = {"response_type": "code", "client_id": agent.identity.client_id, "redirect_uri": redirect_uri,
                 "scope": " ".join(direct_scopes), "state": state, "code_challenge_method": "S256",
                 "code_challenge": challenge}
        if not _host_allowed(authorize, issuer, [d for d in meta.get("poppy_domains") or [] if isinstance(d, str)]):
            step.fail(StepFinding(
                code="authorization_endpoint_foreign_host", source="issuer metadata", requirement="PAP-4.5",
                message=f"The authorization endpoint {authorize} is on neither your issuer's host nor one of its "
                        "poppy_domains.", hint="See the exchange above.", doc="sign-in.md#turning-it-on"))
            return None
        return DirectStart(authorize_url=f"{authorize}?{urlencode(query)}", state=state, verifier=verifier,
                           redirect_uri=redirect_uri)
    # Informational, not failed: a company may serve agents signed out only.
    step.findings.append(StepFinding(
        code="sign_in_not_offered", source="issuer metadata", requirement="PAP-4.6",
        message="Your issuer's metadata names neither a device_authorization_endpoint nor an "
                "authorization_endpoint, so no agent can sign a user in, and the simulator stops before the "
                "signed-in steps.",
        hint="Turn on Device Sign-In (or Direct Sign-In) in your issuer settings, with the scopes agents may ask "
             "for, and connect your login page.", doc="sign-in.md#turning-it-on", setting=_SETTINGS))
    return None


async def _start_device(step: Step, agent: SimulatorAgent, meta: dict[str, Any], *, issuer: str, endpoint: str,
                        scopes: list[str]) -> DeviceStart | None:
    answer = await agent.device_authorization(issuer, endpoint, " ".join(scopes))
    body = json_of(answer.body) if answer.status == 200 else None
    try:
        started = msgspec.convert({"interval": 5, **body}, type=DeviceStart) if isinstance(body, dict) else None
    except msgspec.ValidationError:
        started = None
    if started is None:
        _refused(step, answer, "The device authorization endpoint refused the simulator",
                 "Check that Device Sign-In is on in your issuer settings with these scopes, and that your agent "
                 "policy lets the simulator in.")
        return None
    domains = [d for d in meta.get("poppy_domains") or [] if isinstance(d, str)]
    for link in (started.verification_uri, started.verification_uri_complete):
        if not _host_allowed(link, issuer, domains):
            step.fail(StepFinding(
                code="verification_uri_foreign_host", source="device authorization endpoint",
                requirement="PAP-4.6-02",
                message=f"The sign-in link {link} is on neither your issuer's host nor one of its poppy_domains: "
                        "an agent must not show it.", hint="See the exchange above.",
                doc="sign-in.md#device-sign-in-as-the-user-sees-it"))
            return None
    return started


def judge_redemption(step: Step, answer: FetchResult) -> dict[str, Any] | None:
    """The ``authorization_code`` grant's answer: the token response, or None with the step's finding."""
    body = json_of(answer.body)
    if answer.status == 200 and isinstance(body, dict) and isinstance(body.get("access_token"), str):
        return body
    code = error_of(answer) or f"http_{answer.status}"
    step.fail(StepFinding(
        code=code, source="token endpoint", requirement="PAP-4.5",
        message=f"The token endpoint refused the authorization code ({answer.status} {code}).",
        hint="See the exchange above.", doc="sign-in.md#turning-it-on", setting=_SETTINGS))
    return None


def judge_poll(step: Step, answer: FetchResult) -> PollOutcome:
    """Step 3, one poll's answer: granted, pending (``slow_down`` noted), or over with its finding."""
    body = json_of(answer.body)
    if answer.status == 200 and isinstance(body, dict) and isinstance(body.get("access_token"), str):
        return PollOutcome(granted=body)
    code = error_of(answer) or f"http_{answer.status}"
    if answer.status == 400 and code in _PENDING:
        return PollOutcome(pending=True, slow_down=code == "slow_down")
    doc = "sign-in.md#device-sign-in-as-the-user-sees-it"
    if code == "access_denied":
        message, hint = ("The sign-in was denied (on your consent page or at your login page).",
                         "Run the simulator again and allow access on the consent page.")
    elif code == "expired_token":
        message, hint = ("The device code expired before the sign-in was finished.",
                         "Run the simulator again and finish signing in within the time shown.")
    else:
        message, hint = (f"The token endpoint refused the device_code grant ({answer.status} {code}).",
                         "See the exchange above.")
        doc = "sign-in.md#what-the-agent-does-meanwhile"
    step.fail(StepFinding(code=code, source="token endpoint", requirement="PAP-4.6", message=message, hint=hint,
                          doc=doc, setting=_SETTINGS))
    return PollOutcome()
