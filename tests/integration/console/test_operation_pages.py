"""The dashboard's operations, webhooks and operation-kinds pages at the wire: the ledger list
(filters, stuck highlighted, the polled fragment), an operation's page (revisions and what
changed, the confirmation, the perform attempts, redeliver), endpoints (secret shown once,
edit, rotate, disable/enable, delete refused while a kind uses it, test event, recovery),
messages and their attempts, kinds (create, edit, delete), the overview's counts. Every
action asks first where it should, is audited and refused without CSRF; viewers are
refused by the role walk (``test_role_walk.py``); another tenant's objects are 404."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from frontdoor_operations import ledger
from frontdoor_operations.perform import perform_message
from frontdoor_operations.rules import CallerView
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, SenderResponse
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.support.clock import ShiftableClock


class ScriptedSender:
    """A `Sender` answering from a list (the last answer repeats), recording what it was sent."""

    def __init__(self, *answers: tuple[int, bytes]) -> None:
        self.answers = list(answers)
        self.sent: list[str] = []

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:
        self.sent.append(headers["webhook-id"])
        status, answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return SenderResponse(status=status, headers={"content-type": "application/json"}, body=answer)


def policy(*delays_s: float) -> DeliveryPolicy:
    return DeliveryPolicy(retry=RetryPolicy(schedule=tuple(timedelta(seconds=d) for d in delays_s or (0, 5)),
                                            jitter=0.0, retry_after_max=timedelta(minutes=10)),
                          timeout=timedelta(seconds=2), lease=timedelta(seconds=30))


async def deliver_once(runtime: Runtime, message_id: str, sender: ScriptedSender, *delays_s: float) -> Any:
    """One attempt at a perform (or any) message, as the dispatcher would make it."""
    return await perform_message(runtime.pool, runtime.redis, message_id, sender=sender,
                                 kek=Kek.from_env_value(runtime.settings.kek), clock=runtime.clock,
                                 policy=policy(*delays_s))


async def add_endpoint(console: AsyncTestClient[Any], tenant: TenantHandle, *, url: str | None = None,
                       event_types: list[str] | None = None) -> str:
    r = await console.post("/api/v1/webhook-endpoints", headers=tenant.auth,
                           json={"url": url or f"https://{unique('hooks-')}.example/perform",
                                 "event_types": event_types or []})
    assert r.status_code == 201, r.text
    return str(r.json()["endpoint"]["id"])


async def add_kind(console: AsyncTestClient[Any], tenant: TenantHandle, endpoint_id: str,
                   name: str | None = None) -> str:
    name = name or unique("order.place-")
    r = await console.put(f"/api/v1/operation-kinds/{name}", headers=tenant.auth,
                          json={"perform_endpoint_id": endpoint_id, "scopes": ["orders:write"]})
    assert r.status_code == 200, r.text
    return name


async def add_operation(runtime: Runtime, tenant_id: str, kind: str, *, client_id: str | None = None,
                        account: str | None = None, summary: str = "Order 2 x espresso beans for 38.00 EUR",
                        terms: dict[str, Any] | None = None, confirm: bool = False) -> ledger.Operation:
    """An operation proposed (and confirmed by the user through the agent) directly in the ledger."""
    owner = CallerView(client_id=client_id or f"https://{unique('agent-')}.example/agent.json",
                       user_id=unique("user-"), session_id=new_id("ses"), account=account)
    async with runtime.pool.acquire() as conn:
        op, _ = await ledger.propose(conn, tenant_id, owner, ledger.Proposal(
            kind=kind, summary=summary, terms=terms if terms is not None else {"total": {"amount": "38.00"}}),
            now=runtime.clock())
        if confirm:
            op, message_id = await ledger.confirm(conn, tenant_id, op.id, revision=op.revision, approved_by="user",
                                                  via="agent", now=runtime.clock())
            assert message_id is not None
            op = await ledger.get_operation(conn, tenant_id, op.id)  # type: ignore[assignment]
    assert op is not None
    return op


async def _audit(db: Any, tenant: TenantHandle, action: str) -> list[Any]:
    return list(await db.fetch("SELECT target_id, details FROM audit_log WHERE tenant_id = $1 AND action = $2",
                               tenant.id, action))


async def test_operations_list_filters_highlights_stuck_and_polls(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime,
    clock: ShiftableClock,
) -> None:
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    other_kind = await add_kind(console, tenant, endpoint)
    agent = f"https://{unique('agent-')}.example/agent.json"
    proposed = await add_operation(runtime, tenant.id, kind, client_id=agent, account="acct-1",
                                   summary="Book a table for two")
    running = await add_operation(runtime, tenant.id, other_kind, account="acct-2", summary="Refund order 9",
                                  confirm=True)
    theirs = await add_operation(runtime, other_tenant.id,
                                 await add_kind(console, other_tenant, await add_endpoint(console, other_tenant)),
                                 summary="Their secret operation")
    await sign_in(console, tenant.email)

    page = await console.get("/operations")
    assert page.status_code == 200
    assert proposed.id in page.text and running.id in page.text and "Book a table for two" in page.text
    assert theirs.id not in page.text and "Their secret operation" not in page.text
    assert 'hx-get="/operations/rows"' in page.text and 'hx-trigger="every 5s"' in page.text
    assert 'class="stuck"' not in page.text  # confirmed just now: not stuck yet

    clock.advance(minutes=10)  # no outcome ten minutes after the confirm: stuck
    page = await console.get("/operations")
    row = re.search(rf'<tr data-operation="{running.id}"[^>]*>', page.text)
    assert row and 'class="stuck"' in row.group(0)
    assert 'class="stuck"' not in re.search(rf'<tr data-operation="{proposed.id}"[^>]*>', page.text).group(0)  # type: ignore[union-attr]
    stuck = await console.get("/operations", params={"stuck": "true"})
    assert running.id in stuck.text and proposed.id not in stuck.text

    for params, shown, hidden in [({"state": "proposed"}, proposed, running), ({"state": "in_progress"}, running,
                                                                               proposed),
                                  ({"kind": other_kind}, running, proposed), ({"client_id": agent}, proposed, running),
                                  ({"account": "acct-2"}, running, proposed)]:
        r = await console.get("/operations", params=params)
        assert r.status_code == 200 and shown.id in r.text and hidden.id not in r.text, params
        assert "hx-get=\"/operations/rows?" in r.text  # the poll keeps the filters
    later = (clock() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    assert proposed.id not in (await console.get("/operations", params={"since": later})).text
    assert proposed.id in (await console.get("/operations", params={"until": later, "range": "24h"})).text
    assert (await console.get("/operations", params={"since": "yesterday"})).status_code == 422
    assert (await console.get("/operations", params={"state": "bogus"})).status_code == 422

    rows = await console.get("/operations/rows", params={"state": "in_progress"}, headers={"HX-Request": "true"})
    assert rows.status_code == 200 and "<html" not in rows.text
    assert running.id in rows.text and proposed.id not in rows.text and 'class="stuck"' in rows.text
    assert (await console.get(f"/operations/{theirs.id}")).status_code == 404
    console.cookies.clear()


async def test_operation_page_revisions_confirmation_attempts_and_redeliver(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime, db: Any,
) -> None:
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    op = await add_operation(runtime, tenant.id, kind, account="acct-7", summary="Order 1 x <b>beans</b>",
                             terms={"total": {"amount": "19.00", "currency": "EUR"},
                                    "items": [{"sku": "<script>x</script>", "qty": 1}]})
    async with runtime.pool.acquire() as conn:
        op = await ledger.revise(conn, tenant.id, op.id, summary="Order 2 x beans", now=runtime.clock(),
                                 terms={"total": {"amount": "38.00", "currency": "EUR"},
                                        "items": [{"sku": "<script>x</script>", "qty": 2}], "note": "gift"})
        op, message_id = await ledger.confirm(conn, tenant.id, op.id, revision=2, approved_by="user", via="website",
                                              now=runtime.clock())
    assert message_id is not None
    down = ScriptedSender((503, b'<b>down</b> for "maintenance"'))
    report = await deliver_once(runtime, message_id, down)
    assert report is not None and report.state == "pending"
    unconfirmed = await add_operation(runtime, tenant.id, kind)
    csrf = await sign_in(console, tenant.email)

    page = await console.get(f"/operations/{op.id}")
    assert page.status_code == 200
    text = page.text
    assert "Order 2 x beans" in text and "Order 1 x &lt;b&gt;beans&lt;/b&gt;" in text
    assert "<script>x</script>" not in text and "&lt;script&gt;x&lt;/script&gt;" in text
    assert "&#34;amount&#34;: &#34;38.00&#34;" in text or "&quot;amount&quot;: &quot;38.00&quot;" in text
    for path in ("terms.total.amount", "terms.items[0].qty", "terms.note"):
        assert f'<code class="change">{path}</code>' in text, path
    assert "terms.total.currency" not in text and '<span class="change">summary</span>' in text
    confirmation = re.search(r'<dl class="facts" id="confirmation">(.*?)</dl>', text, re.S).group(1)  # type: ignore[union-attr]
    assert "the user" in confirmation and "your website" in confirmation and "<dd>2</dd>" in confirmation
    assert message_id in text and "HTTP 503" in text and '<code class="small">http_5xx</code>' in text
    assert "&lt;b&gt;down&lt;/b&gt;" in text and "<b>down</b>" not in text
    assert 'data-attempt="1"' in text and 'data-attempt="2"' not in text
    assert f'hx-get="/operations/{op.id}/delivery"' in text  # in progress: the delivery section polls
    assert 'href="/operations/' + op.id + '/redeliver"' in text

    fragment = await console.get(f"/operations/{op.id}/delivery", headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text and 'data-attempt="1"' in fragment.text

    assert (await console.get(f"/operations/{unconfirmed.id}/redeliver")).status_code == 404
    confirm = await console.get(f"/operations/{op.id}/redeliver")
    assert confirm.status_code == 200 and "Send the perform webhook again?" in confirm.text
    r = await console.post(f"/operations/{op.id}/redeliver", data={"confirm": "yes"}, follow_redirects=False)
    assert r.status_code == 403  # no CSRF token
    r = await console.post(f"/operations/{op.id}/redeliver", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Send the perform webhook again?" in r.text  # asked again, nothing done
    assert not await _audit(db, tenant, "webhook_message.redelivered")
    r = await console.post(f"/operations/{op.id}/redeliver", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/operations/{op.id}?notice=redelivered"
    [row] = await _audit(db, tenant, "webhook_message.redelivered")
    assert row["target_id"] == message_id

    up = ScriptedSender((200, b'{"outcome": "succeeded", "result": {"summary": "Order 1042 placed"}}'))
    report = await deliver_once(runtime, message_id, up)  # due at once after the redeliver
    assert report is not None and report.state == "delivered" and up.sent == [message_id]
    page = await console.get(f"/operations/{op.id}?notice=redelivered")
    assert "Perform webhook queued again" in page.text
    assert 'data-attempt="2"' in page.text and "Order 1042 placed" in page.text
    assert 'id="op-state">succeeded' in page.text
    assert f'hx-get="/operations/{op.id}/delivery"' not in page.text  # final and delivered: no more polling

    theirs = await add_operation(runtime, other_tenant.id,
                                 await add_kind(console, other_tenant, await add_endpoint(console, other_tenant)),
                                 confirm=True)
    for path in (f"/operations/{theirs.id}", f"/operations/{theirs.id}/delivery",
                 f"/operations/{theirs.id}/redeliver"):
        assert (await console.get(path)).status_code == 404, path
    r = await console.post(f"/operations/{theirs.id}/redeliver", data={"confirm": "yes", "_csrf_token": csrf})
    assert r.status_code == 404
    console.cookies.clear()


async def test_endpoint_secret_once_edit_rotate_disable_enable_and_delete(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any,
) -> None:
    csrf = await sign_in(console, tenant.email)
    page = await console.get("/webhooks")
    assert page.status_code == 200 and 'value="operation.succeeded"' in page.text and "No endpoints yet" in page.text
    bad = await console.post("/webhooks", data={"url": "ftp://nope", "_csrf_token": csrf})
    assert bad.status_code == 422 and 'role="alert"' in bad.text
    url = f"https://{unique('hooks-')}.example/in"
    r = await console.post("/webhooks", data={"url": url, "description": "orders <svc>", "_csrf_token": csrf,
                                              "event_types": ["operation.succeeded", "operation.failed"]})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    secret = re.search(r'<code id="new-secret">(whsec_[^<]+)</code>', r.text).group(1)  # type: ignore[union-attr]
    endpoint_id = await db.fetchval("SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND url = $2",
                                    tenant.id, url)
    assert [a["target_id"] for a in await _audit(db, tenant, "webhook_endpoint.created")] == [endpoint_id]
    listing = await console.get("/webhooks")
    assert url in listing.text and "operation.failed" in listing.text and "status-enabled" in listing.text
    detail = await console.get(f"/webhooks/{endpoint_id}")
    assert detail.status_code == 200 and "orders &lt;svc&gt;" in detail.text
    for text in (listing.text, detail.text):
        assert secret not in text and "whsec_" not in text

    r = await console.post(f"/webhooks/{endpoint_id}", data={"url": url, "description": "orders",
                                                             "event_types": ["operation.confirmed"],
                                                             "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    api = (await console.get(f"/api/v1/webhook-endpoints/{endpoint_id}", headers=tenant.auth)).json()
    assert api["event_types"] == ["operation.confirmed"] and api["description"] == "orders"
    bad = await console.post(f"/webhooks/{endpoint_id}", data={"url": url, "event_types": ["nope.nope"],
                                                               "_csrf_token": csrf})
    assert bad.status_code == 422 and "nope.nope" in bad.text

    confirm = await console.get(f"/webhooks/{endpoint_id}/rotate", params={"overlap": "1h"})
    assert confirm.status_code == 200 and "Rotate this endpoint" in confirm.text and "for 1 hour," in confirm.text
    r = await console.post(f"/webhooks/{endpoint_id}/rotate", data={"overlap": "1h", "_csrf_token": csrf})
    assert r.status_code == 200 and "Rotate this endpoint" in r.text and "new-secret" not in r.text
    r = await console.post(f"/webhooks/{endpoint_id}/rotate", data={"overlap": "1h", "confirm": "yes",
                                                                    "_csrf_token": csrf})
    assert r.status_code == 200
    rotated = re.search(r'<code id="new-secret">(whsec_[^<]+)</code>', r.text).group(1)  # type: ignore[union-attr]
    assert rotated != secret and rotated not in (await console.get(f"/webhooks/{endpoint_id}")).text
    [row] = await _audit(db, tenant, "webhook_endpoint.secret_rotated")
    assert row["details"]["overlap_s"] == 3600

    r = await console.post(f"/webhooks/{endpoint_id}/disable", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Disable this endpoint?" in r.text
    r = await console.post(f"/webhooks/{endpoint_id}/disable", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/webhooks/{endpoint_id}?notice=disabled"
    assert await db.fetchval("SELECT enabled FROM webhook_endpoints WHERE id = $1", endpoint_id) is False
    page = await console.get(f"/webhooks/{endpoint_id}?notice=disabled")
    assert "status-disabled" in page.text and "manual" in page.text and f"/webhooks/{endpoint_id}/enable" in page.text
    assert (await console.get(f"/webhooks/{endpoint_id}/enable")).status_code == 200
    r = await console.post(f"/webhooks/{endpoint_id}/enable", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT enabled FROM webhook_endpoints WHERE id = $1", endpoint_id) is True

    r = await console.post(f"/webhooks/{endpoint_id}/test", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    rows = await console.get(f"/webhooks/{endpoint_id}/messages", headers={"HX-Request": "true"})
    assert rows.status_code == 200 and "<html" not in rows.text and "webhook.test" in rows.text
    assert f'hx-get="/webhooks/{endpoint_id}/messages"' in (await console.get(f"/webhooks/{endpoint_id}")).text

    kind = await add_kind(console, tenant, endpoint_id)
    assert (await console.get(f"/webhooks/{endpoint_id}/delete")).status_code == 200
    r = await console.post(f"/webhooks/{endpoint_id}/delete", data={"confirm": "yes", "_csrf_token": csrf})
    assert r.status_code == 409 and "Operation kinds use this endpoint" in r.text and kind in r.text
    assert "<html" in r.text and 'role="alert"' in r.text
    assert (await console.delete(f"/api/v1/operation-kinds/{kind}", headers=tenant.auth)).status_code == 204
    r = await console.post(f"/webhooks/{endpoint_id}/delete", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/webhooks?notice=deleted"
    assert await db.fetchval("SELECT count(*) FROM webhook_endpoints WHERE id = $1", endpoint_id) == 0
    actions = {r["action"] for r in await db.fetch("SELECT action FROM audit_log WHERE tenant_id = $1", tenant.id)}
    assert {"webhook_endpoint.updated", "webhook_endpoint.disabled", "webhook_endpoint.enabled",
            "webhook_endpoint.test_sent", "webhook_endpoint.deleted"} <= actions

    theirs = await add_endpoint(console, other_tenant)
    for path in ("", "/messages", "/rotate", "/disable", "/enable", "/delete", "/recover?since=2026-01-01T00:00"):
        assert (await console.get(f"/webhooks/{theirs}{path}")).status_code == 404, path
    for path in ("/disable", "/delete", "/rotate", "/test", ""):
        r = await console.post(f"/webhooks/{theirs}{path}", data={"confirm": "yes", "_csrf_token": csrf,
                                                                  "url": "https://x.example/"})
        assert r.status_code == 404, path
    assert await db.fetchval("SELECT enabled FROM webhook_endpoints WHERE id = $1", theirs) is True
    console.cookies.clear()


async def test_message_page_attempts_redeliver_and_recover(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime, db: Any,
) -> None:
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    op = await add_operation(runtime, tenant.id, kind, confirm=True)
    message_id = op.perform_message_id
    assert message_id is not None
    # One attempt only: its failure exhausts the message.
    report = await deliver_once(runtime, message_id, ScriptedSender((500, b"<i>broken</i>")), 0)
    assert report is not None and report.state == "exhausted"
    csrf = await sign_in(console, tenant.email)

    page = await console.get(f"/webhooks/messages/{message_id}")
    assert page.status_code == 200 and "operation.perform" in page.text and "status-exhausted" in page.text
    assert "&lt;i&gt;broken&lt;/i&gt;" in page.text and "HTTP 500" in page.text
    assert f'href="/operations/{op.id}"' in page.text and "idempotency_key" in page.text
    assert 'hx-get="/webhooks/messages/' not in page.text  # finished: no polling
    detail = await console.get(f"/webhooks/{endpoint}")
    assert message_id in detail.text and "status-exhausted" in detail.text
    attempts = await console.get(f"/webhooks/messages/{message_id}/attempts", headers={"HX-Request": "true"})
    assert attempts.status_code == 200 and "<html" not in attempts.text and 'data-attempt="1"' in attempts.text

    assert "Send this message again?" in (await console.get(f"/webhooks/messages/{message_id}/redeliver")).text
    r = await console.post(f"/webhooks/messages/{message_id}/redeliver", data={"_csrf_token": csrf})
    assert r.status_code == 200 and await db.fetchval("SELECT state FROM webhook_messages WHERE id = $1",
                                                      message_id) == "exhausted"
    r = await console.post(f"/webhooks/messages/{message_id}/redeliver", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/webhooks/messages/{message_id}?notice=redelivered"
    assert await db.fetchval("SELECT state FROM webhook_messages WHERE id = $1", message_id) == "pending"
    page = await console.get(f"/webhooks/messages/{message_id}")
    assert f'hx-get="/webhooks/messages/{message_id}/attempts"' in page.text  # pending again: it polls
    assert [a["target_id"] for a in await _audit(db, tenant, "webhook_message.redelivered")] == [message_id]

    since = (runtime.clock() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    confirm = await console.get(f"/webhooks/{endpoint}/recover", params={"since": since})
    assert confirm.status_code == 200 and "Send the failed messages again?" in confirm.text and since in confirm.text
    assert (await console.get(f"/webhooks/{endpoint}/recover", params={"since": "soon"})).status_code == 422
    r = await console.post(f"/webhooks/{endpoint}/recover", data={"since": since, "_csrf_token": csrf})
    assert r.status_code == 200 and "Send the failed messages again?" in r.text
    r = await console.post(f"/webhooks/{endpoint}/recover", data={"since": since, "confirm": "yes",
                                                                 "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    recovery_id = re.search(r"recovery=(whr_\w+)", r.headers["location"]).group(1)  # type: ignore[union-attr]
    [row] = await _audit(db, tenant, "webhook_endpoint.recovered")
    assert row["target_id"] == endpoint
    page = await console.get(r.headers["location"])
    assert "Recovery queued" in page.text and recovery_id in page.text and 'id="recovery"' in page.text

    theirs_op = await add_operation(runtime, other_tenant.id,
                                    await add_kind(console, other_tenant, await add_endpoint(console, other_tenant)),
                                    confirm=True)
    theirs = theirs_op.perform_message_id
    for path in ("", "/attempts", "/redeliver"):
        assert (await console.get(f"/webhooks/messages/{theirs}{path}")).status_code == 404, path
    r = await console.post(f"/webhooks/messages/{theirs}/redeliver", data={"confirm": "yes", "_csrf_token": csrf})
    assert r.status_code == 404
    # Another tenant's recovery ID in the URL shows nothing.
    assert recovery_id not in (await console.get(f"/webhooks/{endpoint}", params={"recovery": "whr_x"})).text
    console.cookies.clear()


async def test_operation_kinds_create_edit_and_delete(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                      other_tenant: TenantHandle, runtime: Runtime, db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    empty = await console.get("/operation-kinds")
    assert empty.status_code == 200 and "add a webhook endpoint" in empty.text
    perform = await add_endpoint(console, tenant)
    reprice = await add_endpoint(console, tenant, url=f"https://{unique('price-')}.example/reprice")
    page = await console.get("/operation-kinds")
    assert f'<option value="{perform}"' in page.text and f'<option value="{reprice}"' in page.text

    form = {"name": "slot.book", "description": "Book a slot", "scopes": "slots:write  slots:read",
            "default_expiry_seconds": "600", "max_expiry_seconds": "3600", "perform_endpoint_id": perform,
            "reprice_endpoint_id": "", "_csrf_token": csrf}
    bad = await console.post("/operation-kinds", data={**form, "name": "Bad Name!"})
    assert bad.status_code == 422 and 'role="alert"' in bad.text and 'value="Bad Name!"' in bad.text
    bad = await console.post("/operation-kinds", data={**form, "default_expiry_seconds": "soon"})
    assert bad.status_code == 422 and "default_expiry_seconds" in bad.text
    theirs = await add_endpoint(console, other_tenant)
    bad = await console.post("/operation-kinds", data={**form, "perform_endpoint_id": theirs})
    assert bad.status_code == 422
    r = await console.post("/operation-kinds", data=form, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/operation-kinds?notice=kind_saved"
    api = {k["name"]: k for k in (await console.get("/api/v1/operation-kinds", headers=tenant.auth)).json()["data"]}
    assert api["slot.book"]["scopes"] == ["slots:write", "slots:read"]
    assert api["slot.book"]["default_expiry_seconds"] == 600 and api["slot.book"]["reprice_endpoint_id"] is None
    dup = await console.post("/operation-kinds", data=form)
    assert dup.status_code == 409

    edit = await console.get("/operation-kinds/slot.book")
    assert edit.status_code == 200 and 'value="slots:write slots:read"' in edit.text
    r = await console.post("/operation-kinds/slot.book", data={**form, "name": "renamed", "scopes": "slots:write",
                                                               "reprice_endpoint_id": reprice},
                           follow_redirects=False)
    assert r.status_code == 303
    api = {k["name"]: k for k in (await console.get("/api/v1/operation-kinds", headers=tenant.auth)).json()["data"]}
    assert "renamed" not in api and api["slot.book"]["scopes"] == ["slots:write"]
    assert api["slot.book"]["reprice_endpoint_id"] == reprice
    assert len(await _audit(db, tenant, "operation_kind.put")) == 2

    assert "Delete this operation kind?" in (await console.get("/operation-kinds/slot.book/delete")).text
    r = await console.post("/operation-kinds/slot.book/delete", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Delete this operation kind?" in r.text
    r = await console.post("/operation-kinds/slot.book/delete", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await _audit(db, tenant, "operation_kind.delete")

    used = await add_kind(console, tenant, perform)
    await add_operation(runtime, tenant.id, used)
    page = await console.get("/operation-kinds")
    assert f'href="/operation-kinds/{used}"' in page.text and f'href="/operation-kinds/{used}/delete"' not in page.text
    r = await console.post(f"/operation-kinds/{used}/delete", data={"confirm": "yes", "_csrf_token": csrf})
    assert r.status_code == 409 and "cannot be deleted" in r.text

    their_kind = await add_kind(console, other_tenant, theirs)
    for path in (f"/operation-kinds/{their_kind}", f"/operation-kinds/{their_kind}/delete"):
        assert (await console.get(path)).status_code == 404, path
        r = await console.post(path, data={**form, "confirm": "yes"})
        assert r.status_code == 404, path
    assert len((await console.get("/api/v1/operation-kinds", headers=other_tenant.auth)).json()["data"]) == 1
    console.cookies.clear()


async def test_overview_counts_operations_deliveries_and_attention(
    console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, clock: ShiftableClock,
) -> None:
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    await add_operation(runtime, tenant.id, kind)
    running = await add_operation(runtime, tenant.id, kind, confirm=True)
    assert running.perform_message_id is not None
    await deliver_once(runtime, running.perform_message_id, ScriptedSender((503, b"down")))
    spare = await add_endpoint(console, tenant)
    assert (await console.post(f"/api/v1/webhook-endpoints/{spare}/disable", headers=tenant.auth)).status_code == 200
    await sign_in(console, tenant.email)
    page = (await console.get("/")).text
    assert 'data-count="ops-24h-proposed">1<' in page and 'data-count="ops-30d-in_progress">1<' in page
    assert 'data-count="ops-24h-succeeded">0<' in page
    assert 'data-count="deliveries-retrying">1<' in page and 'data-count="attempts-failed-24h">1<' in page
    assert 'data-attention="disabled-endpoints">1 webhook endpoint disabled' in page
    assert 'data-attention="failing-endpoints">1 webhook endpoint failing' in page
    assert 'data-attention="stuck"' not in page
    clock.advance(minutes=6)
    page = (await console.get("/")).text
    assert 'data-attention="stuck">1 operation stuck in progress' in page and 'href="/operations?stuck=true"' in page
    console.cookies.clear()


async def test_new_posts_refuse_missing_csrf_and_viewers_get_no_controls(
    console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, db: Any,
) -> None:
    endpoint = await add_endpoint(console, tenant)
    kind = await add_kind(console, tenant, endpoint)
    op = await add_operation(runtime, tenant.id, kind, confirm=True)
    await sign_in(console, tenant.email)
    for path, data in [("/webhooks", {"url": "https://a.example/x"}), (f"/webhooks/{endpoint}", {"url": "https://b.example/"}),
                       (f"/webhooks/{endpoint}/disable", {"confirm": "yes"}),
                       (f"/webhooks/{endpoint}/rotate", {"confirm": "yes"}),
                       (f"/webhooks/{endpoint}/delete", {"confirm": "yes"}), (f"/webhooks/{endpoint}/test", {}),
                       (f"/webhooks/{endpoint}/recover", {"since": "2026-01-01T00:00", "confirm": "yes"}),
                       (f"/webhooks/messages/{op.perform_message_id}/redeliver", {"confirm": "yes"}),
                       (f"/operations/{op.id}/redeliver", {"confirm": "yes"}),
                       ("/operation-kinds", {"name": "x.y", "perform_endpoint_id": endpoint}),
                       (f"/operation-kinds/{kind}", {"perform_endpoint_id": endpoint}),
                       (f"/operation-kinds/{kind}/delete", {"confirm": "yes"})]:
        for headers in ({}, {"x-csrftoken": "forged"}):
            r = await console.post(path, data=data, headers=headers, follow_redirects=False)
            assert r.status_code == 403, (path, headers)
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action LIKE 'webhook%'"
                             " AND action <> 'webhook_endpoint.created'", tenant.id) == 0

    viewer = await add_admin(db, tenant, "viewer")
    await sign_in(console, viewer)
    for path in ("/operations", f"/operations/{op.id}", "/webhooks", f"/webhooks/{endpoint}",
                 f"/webhooks/messages/{op.perform_message_id}", "/operation-kinds"):
        r = await console.get(path)
        assert r.status_code == 200, path
        main = r.text.split("<main", 1)[1]
        assert 'method="post"' not in main and 'class="button' not in main, path
    assert op.id in (await console.get("/operations")).text
    console.cookies.clear()
