"""The simulator's operation (Operations extension v1): proposed, approved, performed.

Once signed in, the run plays both ends of an operation as they meet in the ledger:

* **the company's side**, by Frontdoor on the company's behalf: a test operation of the
  tenant's first operation kind is proposed in the ledger for the simulator's signed-in
  Session, through the same use case the ledger API's ``POST /v1/operations`` calls
  (`frontdoor_operations.ledger.propose`; the Session is checked live and the agent's,
  OPS-2-01's extension is listed in the simulator's CIMD). Its ``terms`` and ``input`` say
  ``"simulator": true`` so the perform webhook can tell it from a real one;
* **the agent's side**, over HTTP like any agent: ``GET {endpoint}/{id}`` and
  ``POST {endpoint}/{id}/confirm`` ``{revision, approved_by: "user"}`` with the signed-in
  Session Token and a DPoP proof (OPS-6-01/02); the ledger calls the perform webhook as the
  confirm wins and answers with its outcome when it comes within the confirm wait.

The perform webhook's delivery is then read from the webhooks tables (each attempt's URL,
status, time and error class; never the signature) and shown with the outcome. No kind, or
a kind whose perform endpoint is disabled, is a finding.

The perform webhook is the company's production one, so the step is the admin's choice per
run (`OperationTarget`, the run form's checkbox, off by default): not chosen, nothing is
proposed and the step is informational (`not_chosen`). Chosen, the perform data also says
``"simulator": true`` at its top level (the ledger checks the Session's client_id is the
tenant's simulator's, `frontdoor_operations.ledger.perform_data`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import asyncpg
import msgspec
from frontdoor_operations import kinds, ledger
from frontdoor_operations.rules import CallerView
from frontdoor_sessions import session_store
from frontdoor_webhooks.endpoints import get_endpoint

from .agent import SimulatorAgent, error_of, json_of
from .exchange import Exchange
from .step import Step, StepFinding

__all__ = ["OperationTarget", "not_chosen", "operation_target", "run_operation"]

_KINDS_SETTING: Final = "/operation-kinds"
_WEBHOOKS_SETTING: Final = "/webhooks"
SUMMARY: Final = "Frontdoor agent simulator test: nothing to perform (approved by the simulator, not by a user)"


async def _deliveries(conn: asyncpg.Connection, tenant_id: str, operation_id: str) -> list[Exchange]:
    """The perform message's attempts, as the page shows exchanges (no headers, no signature)."""
    rows = await conn.fetch(
        "SELECT a.attempt, a.url, a.response_status, a.duration_ms, a.error_class, m.state FROM webhook_messages m"
        " JOIN webhook_attempts a ON a.tenant_id = m.tenant_id AND a.message_id = m.id"
        " WHERE m.tenant_id = $1 AND m.operation_id = $2 AND m.purpose = 'perform' ORDER BY a.attempt",
        tenant_id, operation_id)
    return [Exchange(method="POST", url=r["url"], status=r["response_status"], elapsed_ms=float(r["duration_ms"]),
                     request_body=f"operation.perform, attempt {r['attempt']} (sent by Frontdoor's ledger, signed "
                                  f"with your endpoint's secret; message {r['state']})",
                     error=r["error_class"] or "") for r in rows]


class OperationTarget(msgspec.Struct, frozen=True, kw_only=True):
    """The kind a run's operation would be of, and where its perform webhook goes (the run form says so)."""

    kind: str
    url: str


async def _first_performable(conn: asyncpg.Connection, tenant_id: str, all_kinds: list[kinds.Kind]
                             ) -> kinds.Kind | None:
    for candidate in all_kinds:
        if await kinds.perform_endpoint_enabled(conn, tenant_id, candidate.name):
            return candidate
    return None


async def operation_target(conn: asyncpg.Connection, tenant_id: str) -> OperationTarget | None:
    """The tenant's first kind with an enabled perform endpoint and that endpoint's URL; None when none."""
    kind = await _first_performable(conn, tenant_id, await kinds.list_kinds(conn, tenant_id))
    if kind is None:
        return None
    endpoint = await get_endpoint(conn, tenant_id, kind.perform_endpoint_id)
    return OperationTarget(kind=kind.name, url=endpoint.url)


def not_chosen(step: Step) -> None:
    """The run was started without its operation: nothing proposed, nothing sent (informational)."""
    step.findings.append(StepFinding(
        code="operation_step_not_chosen", source="simulator",
        message="This run was started without an operation, so nothing was proposed and your perform webhook "
                "was not called.",
        hint="Tick \"Include an operation\" when you run the simulator to test your perform webhook (it sends a "
             "real perform webhook, marked \"simulator\": true).", doc="operations.md#the-perform-webhook"))
    step.summary = "Not chosen for this run: no operation was proposed."


async def _propose(conn: asyncpg.Connection, step: Step, tenant_id: str, session_id: str, *, run_id: str,
                   now: datetime) -> ledger.Operation | None:
    all_kinds = await kinds.list_kinds(conn, tenant_id)
    if not all_kinds:
        step.findings.append(StepFinding(
            code="no_operation_kind", source="frontdoor",
            message="You have no operation kind, so there is nothing to propose, approve and perform.",
            hint="Add a webhook endpoint for your perform URL, then an operation kind that uses it.",
            doc="operations.md#operation-kinds", setting=_KINDS_SETTING))
        step.summary = "No operation kind: the simulator proposed nothing."
        return None
    kind = await _first_performable(conn, tenant_id, all_kinds)
    if kind is None:
        step.fail(StepFinding(
            code="perform_endpoint_disabled", source="frontdoor",
            message=f"The perform endpoint of every operation kind ({', '.join(k.name for k in all_kinds)}) is "
                    "disabled, so a confirmed operation could not be performed (agents' confirms answer 503).",
            hint="Enable the kind's perform webhook endpoint (or point the kind at an enabled one).",
            doc="operations.md#the-perform-webhook", setting=_WEBHOOKS_SETTING))
        return None
    session = await session_store.find_session(conn, tenant_id, session_id)
    if session is None or not session.live:
        step.fail(StepFinding(
            code="session_inactive", source="ledger",
            message="The simulator's Session is no longer live, so nothing can be proposed for it.",
            hint="Run the simulator again.", doc="operations.md#propose--post-v1operations"))
        return None
    owner = CallerView(client_id=session.client_id, user_id=session.user_id, session_id=session.id,
                       account=session.account_id if session.signed_in else None)
    op, _ = await ledger.propose(conn, tenant_id, owner, ledger.Proposal(
        kind=kind.name, summary=SUMMARY, terms={"simulator": True}, user_approval_required=True,
        input={"simulator": True, "simulator_run": run_id}), now=now)
    return op


async def run_operation(step: Step, agent: SimulatorAgent, conn: asyncpg.Connection, *, tenant_id: str,
                        session_id: str, token: str, endpoint: str, run_id: str, now: datetime) -> None:
    """Propose (for the company), read and confirm (as the agent), and judge the perform outcome into ``step``."""
    op = await _propose(conn, step, tenant_id, session_id, run_id=run_id, now=now)
    if op is None:
        return
    url = f"{endpoint}/{op.id}"
    read = await agent.get(url, token)
    if read.status != 200:
        code = error_of(read) or f"http_{read.status}"
        step.fail(StepFinding(
            code=code, source="operations endpoint", requirement="OPS-3.2-01",
            message=f"The operations endpoint refused the simulator its own operation ({read.status} {code}).",
            hint="See the exchange above.", doc="operations.md#the-operations-endpoint-what-agents-call"))
        return
    answer = await agent.call(f"{url}/confirm", token, {"revision": op.revision, "approved_by": "user"})
    step.exchanges.extend(await _deliveries(conn, tenant_id, op.id))
    body = json_of(answer.body)
    state = body.get("state") if isinstance(body, dict) else None
    result = body.get("result") if isinstance(body, dict) else None
    said = result.get("summary") if isinstance(result, dict) else None
    what = f"Operation {op.id} ({op.kind}) proposed for your company, approved by the simulator"
    if answer.status != 200 or state is None:
        code = error_of(answer) or f"http_{answer.status}"
        step.fail(StepFinding(
            code=code, source="operations endpoint",
            message=f"The confirm was refused ({answer.status} {code}).",
            hint="A 403 insufficient_scope means the sign-in lacks the kind's scopes: offer them for Device "
                 "Sign-In, or change the kind's scopes.", doc="operations.md#the-operations-endpoint-what-agents-call",
            setting=_KINDS_SETTING))
        return
    if state == "succeeded":
        step.ok = True
        step.summary = f"{what}: your perform webhook answered succeeded" + (f": {said}" if said else ".")
    elif state == "failed":
        step.summary = (f"{what}: your perform webhook answered failed" + (f": {said}" if said else "") +
                        ". A known outcome, so informational; a real operation would show the user that summary.")
    elif state == "in_progress":
        failed = [x for x in step.exchanges if x.method == "POST" and x.error]
        if failed:
            step.fail(StepFinding(
                code=failed[-1].error, source="your perform webhook", requirement="OPS-6-03",
                message=f"The perform webhook's delivery failed ({failed[-1].error}, status "
                        f"{failed[-1].status}): the outcome is unknown and Frontdoor will retry.",
                hint="Answer the perform webhook 200 with an outcome (or 202, then report it).",
                doc="operations.md#what-leaves-the-outcome-unknown", setting=_WEBHOOKS_SETTING))
            return
        step.summary = (f"{what}: in progress, your perform webhook has not given an outcome within the confirm "
                        "wait (a 202 to report it later is fine).")
    else:
        step.summary = f"{what}: the confirm answered the operation {state}."
