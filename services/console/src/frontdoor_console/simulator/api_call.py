"""The simulator's call to the company: the first API its ``poppy.json`` lists (PAP §3 ``apis``).

With the signed-out Session just started, as an agent would:

* ``openapi``: fetch the OpenAPI document, take its first ``GET`` operation without path
  parameters (``servers[0].url`` + path) and call it with the Session Token and a DPoP proof
  (PAP-6-03: every listed API accepts Session Tokens, DPoP for OpenAPI; RFC 9449 §7);
* ``mcp``: ask the issuer for a token for that server (``resource`` = its ``url`` and the
  Session's ``session_id``, RFC 8707, PAP §4.3) and send MCP ``tools/list`` with it (PAP-6-04).

Every request goes through the SSRF-safe fetcher. A ``2xx`` passes. A refusal is shown with
its ``WWW-Authenticate`` challenges parsed: ``sign_in_required`` or ``insufficient_scope``
is what a route that needs a sign-in answers a signed-out Session, so it is informational;
any other refusal, status or fetch error is a finding.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urljoin

from frontdoor_core.outbound import FetchError, FetchErrorCode, FetchResult

from .agent import SimulatorAgent, error_of, json_of
from .challenge import parse_challenges
from .step import Step, StepFinding

__all__ = ["SIGN_IN_ERRORS", "call_first_api"]

SIGN_IN_ERRORS: Final = frozenset({"sign_in_required", "insufficient_scope"})
_APIS_SETTING: Final = "/settings"
_MCP_ACCEPT: Final = "application/json, text/event-stream"


def first_operation(doc: Any, doc_url: str) -> str | None:
    """The URL of the document's first ``GET`` operation without path parameters, or None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
        return None
    servers = doc.get("servers")
    server = "/"  # OpenAPI's default server, relative to the document's URL
    if isinstance(servers, list) and servers and isinstance(servers[0], dict) and isinstance(servers[0].get("url"), str):
        server = servers[0]["url"]
    base = urljoin(doc_url, server)
    for path, item in doc["paths"].items():
        if isinstance(path, str) and path.startswith("/") and "{" not in path and isinstance(item, dict) \
                and isinstance(item.get("get"), dict):
            return base.rstrip("/") + path
    return None


def _describe(result: FetchResult) -> str:
    challenges = parse_challenges(result.headers.get("www-authenticate", ""))
    if not challenges:
        return ""
    parts = []
    for c in challenges:
        shown = ", ".join(f"{k}={v}" for k, v in c.params.items() if k != "error_description")
        parts.append(f"{c.scheme}" + (f" ({shown})" if shown else ""))
    described = "; ".join(parts)
    why = next((c.params["error_description"] for c in challenges if "error_description" in c.params), "")
    return described + (f". {why}" if why else "")


def _outcome(step: Step, result: FetchResult, what: str) -> None:
    """Judge the company's answer to the simulator's call."""
    if 200 <= result.status < 300:
        step.ok, step.summary = True, f"{what} answered {result.status} to the signed-out Session."
        return
    # The challenge says why (RFC 6750 §3, RFC 9449 §7.1); a body's "error" is only a fallback.
    error = next((c.error for c in parse_challenges(result.headers.get("www-authenticate", "")) if c.error),
                 None) or error_of(result)
    challenge = _describe(result)
    if result.status in (401, 403) and error in SIGN_IN_ERRORS:
        step.summary = (f"{what} refused the signed-out Session with {result.status} {error}: a sign-in is needed, "
                        f"as the route says ({challenge}). An agent would ask its user to sign in now.")
        return
    if result.status in (401, 403):
        step.fail(StepFinding(
            code=error or "api_refused", source="your API", requirement="PAP-6-03",
            message=f"{what} refused a valid Session Token with its DPoP proof: {result.status} "
                    f"{error or 'without an error code'}" + (f" (WWW-Authenticate: {challenge})" if challenge else "."),
            hint="Check the sdk's configuration: the issuer, your resource-server credential and the public URL "
                 "DPoP proofs are checked against must match what agents use.",
            doc="sdk.md#refusals", setting=_APIS_SETTING))
        return
    step.fail(StepFinding(
        code="api_bad_status", source="your API",
        message=f"{what} answered {result.status}.",
        hint="List in poppy.json only APIs that answer on the public internet, at the URL listed.",
        doc="sdk.md#the-public-url", setting=_APIS_SETTING))


def _failed_fetch(step: Step, exc: FetchError, what: str) -> None:
    step.fail(StepFinding(
        code="not_found" if exc.status == 404 else str(exc.code), source="your API", message=f"{what} could not be reached: {exc}",
        hint="List in poppy.json only APIs that answer over HTTPS on a public address.",
        doc="poppy-json.md#publish-check-findings", setting=_APIS_SETTING))


async def _call_openapi(step: Step, agent: SimulatorAgent, url: str, token: str) -> None:
    try:
        listing = await agent.http.fetch(url)
    except FetchError as exc:
        if exc.code != FetchErrorCode.TOO_LARGE:
            raise
        # Agents read large documents; the simulator reads 100 KB at most (the SSRF-safe budget).
        step.summary = (f"Your OpenAPI document at {url} is larger than the simulator reads "
                        f"({exc}), so it called no operation; list an MCP server first to have one called.")
        return
    target = first_operation(json_of(listing.body), listing.final_url)
    if target is None:
        step.fail(StepFinding(
            code="no_get_operation", source="your OpenAPI document",
            message="The OpenAPI document lists no GET operation without path parameters for the simulator to call.",
            hint="List the OpenAPI document itself (PAP-6-01), with its operations under paths.",
            doc="scanner.md#not-openapi", setting=_APIS_SETTING))
        return
    _outcome(step, await agent.get(target, token), f"GET {target}")


async def _call_mcp(step: Step, agent: SimulatorAgent, url: str, *, issuer: str, token_endpoint: str,
                    session_id: str) -> None:
    answer = await agent.start_session(issuer, token_endpoint, {"resource": url, "session_id": session_id})
    parsed = json_of(answer.body) if answer.status == 200 else None
    doc: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    token = doc.get("access_token")
    if not isinstance(token, str):
        code = error_of(answer) or f"http_{answer.status}"
        step.fail(StepFinding(
            code=code, source="token endpoint", requirement="RFC 8707",
            message=f"The issuer refused a token for your MCP server ({answer.status} {code}).",
            hint="The MCP server's url in your issuer settings must be the one poppy.json lists.",
            doc="sessions.md#mcp-servers-resource-tokens", setting=_APIS_SETTING))
        return
    scheme = "DPoP" if str(doc.get("token_type", "")).lower() == "dpop" else "Bearer"
    result = await agent.call(url, token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, scheme=scheme,
                              accept=_MCP_ACCEPT)
    _outcome(step, result, f"MCP tools/list at {url}")
    if step.ok:
        body = json_of(result.body)
        tools = body.get("result", {}).get("tools") if isinstance(body, dict) else None
        if isinstance(tools, list):
            step.summary += f" {len(tools)} tool(s) listed."


async def call_first_api(step: Step, agent: SimulatorAgent, apis: list[Any], *, token: str, issuer: str,
                         token_endpoint: str, session_id: str | None) -> None:
    """Call the first listed API (or MCP server) with the Session; judge its answer into ``step``."""
    if not apis:
        step.summary = "Your poppy.json lists no API or MCP server, so there is nothing to call."
        return
    first = apis[0]
    what = f"Your {first.type} listing {first.url}"
    try:
        if first.type == "mcp":
            if session_id is None:
                step.summary = "The token endpoint answered no session_id, so no MCP token can be asked for."
                return
            await _call_mcp(step, agent, first.url, issuer=issuer, token_endpoint=token_endpoint,
                            session_id=session_id)
        else:
            await _call_openapi(step, agent, first.url, token)
    except FetchError as exc:
        _failed_fetch(step, exc, what)
