"""A fake Frontdoor ledger API behind httpx.MockTransport, per docs/operations.md.

Enough of the ledger for Northwind's side: propose (with ``action_key`` reuse while open),
read, confirm from the website (a compare-and-set on the revision). It takes the Session's
account from the fake issuer's Session states, as the real ledger does from its own store.
The conversations API (``/v1/conversations/{id}/...``) records what the concierge posts and
answers as the real one does; conversations in ``closed`` answer 409 ``conversation_closed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.integration.northwind.fake_frontdoor import CREDENTIAL, FakeFrontdoor

LEDGER = "https://ledger.frontdoor.test/northwind"
OPERATIONS = f"{LEDGER}/v1/operations"
CONVERSATIONS = f"{LEDGER}/v1/conversations"


@dataclass
class FakeLedger:
    frontdoor: FakeFrontdoor
    operations: dict[str, dict[str, Any]] = field(default_factory=dict)
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    without_extension: set[str] = field(default_factory=set)  # client IDs that list no operations extension
    closed: set[str] = field(default_factory=set)  # conversation IDs that are closed
    down: bool = False

    def handles(self, request: httpx.Request) -> bool:
        return str(request.url).startswith(LEDGER)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = str(request.url.copy_with(query=None))
        self.requests.append((request.method, path, body))
        if self.down:
            return httpx.Response(503, headers={"Retry-After": "4"})
        if request.headers.get("authorization") != f"Bearer {CREDENTIAL}":
            return httpx.Response(401, json={"error": "invalid_client"})
        if request.method == "POST" and path == OPERATIONS:
            return self._propose(body)
        if request.method == "POST" and path.startswith(f"{CONVERSATIONS}/"):
            return self._conversation(path.removeprefix(f"{CONVERSATIONS}/").split("/"), body)
        operation_id = path.removeprefix(f"{OPERATIONS}/").split("/")[0]
        if operation_id not in self.operations:
            return httpx.Response(404, json={"error": "operation_not_found"})
        if request.method == "GET":
            return httpx.Response(200, json={"operation": self.operations[operation_id],
                                             "details": self.details[operation_id]})
        if path.endswith("/confirm"):
            return self._confirm(operation_id, body)
        return httpx.Response(404, json={"error": "not_found"})

    def _propose(self, body: dict[str, Any]) -> httpx.Response:
        caller = body["caller"]
        if caller["client_id"] in self.without_extension:
            return httpx.Response(403, json={"error": "extension_required", "extension": "operations",
                                             "error_description": "the agent does not list operations"})
        state = self.frontdoor.sessions.get(caller["session_id"])
        if state is None:
            return httpx.Response(409, json={"error": "session_inactive"})
        account = state.account if state.signed_in else None
        key = body.get("action_key")
        for operation_id, details in self.details.items():
            same = (details["client_id"], details["user_id"], details["account"], details["action_key"])
            if key is not None and same == (caller["client_id"], caller["user_id"], account, key) \
                    and self.operations[operation_id]["state"] in ("proposed", "in_progress"):
                return httpx.Response(200, json={"operation": self.operations[operation_id]})
        operation_id = f"op_{len(self.operations) + 1}"
        self.operations[operation_id] = {
            "operation_id": operation_id, "revision": 1, "state": "proposed", "summary": body["summary"],
            "terms": body.get("terms"), "expires_at": "2026-09-21T12:00:00Z",
            "user_approval_required": body["user_approval_required"],
            "url": body["url"].replace("{operation_id}", operation_id) if body.get("url") else None,
            "confirmation": None, "result": None,
        }
        self.details[operation_id] = {
            "kind": body["kind"], "client_id": caller["client_id"], "user_id": caller["user_id"], "account": account,
            "session_id": caller["session_id"], "action_key": key, "input": body.get("input"),
            "created_at": "2026-09-21T11:45:00Z", "updated_at": "2026-09-21T11:45:00Z", "needs_attention": False,
        }
        return httpx.Response(201, json={"operation": self.operations[operation_id]})

    def _conversation(self, parts: list[str], body: dict[str, Any]) -> httpx.Response:
        conversation_id, action = parts[0], parts[-1]
        if conversation_id in self.closed:
            return httpx.Response(409, json={"error": "conversation_closed", "title": "closed"})
        if action == "deltas":
            return httpx.Response(202, json={"accepted": True})
        view = {"conversation_id": conversation_id, "status": "idle", "responder": "agent"}
        if action == "messages":
            message = {k: v for k, v in body["message"].items() if k != "operation_id"}
            if body["message"].get("operation_id"):
                message["operation"] = self.operations[body["message"]["operation_id"]]
            return httpx.Response(201, json={"conversation": view,
                                             "message": {**message, "sender": body["sender"], "role": "company"}})
        return httpx.Response(201, json={"conversation": view})

    def conversation_posts(self) -> list[tuple[str, dict[str, Any]]]:
        """``(action, body)`` of each conversation request, in order."""
        return [(path.rsplit("/", 1)[1], body) for method, path, body in self.requests
                if method == "POST" and path.startswith(f"{CONVERSATIONS}/")]

    def _confirm(self, operation_id: str, body: dict[str, Any]) -> httpx.Response:
        operation = self.operations[operation_id]
        state = self.frontdoor.sessions.get(body["session_id"])
        if state is None or not state.signed_in or state.account != self.details[operation_id]["account"]:
            return httpx.Response(404, json={"error": "operation_not_found"})
        if operation["state"] != "proposed":
            return httpx.Response(200, json={"operation": operation})
        if body["revision"] != operation["revision"]:
            return httpx.Response(409, json={"error": "terms_changed", "operation": operation})
        operation.update(state="in_progress", confirmation={"revision": body["revision"], "approved_by": "user",
                                                            "confirmed_at": "2026-09-21T11:50:00Z"})
        return httpx.Response(200, json={"operation": operation})

    def revise(self, operation_id: str, **changes: Any) -> None:
        operation = self.operations[operation_id]
        operation.update(revision=operation["revision"] + 1, **changes)
