"""A company's support agent behind Frontdoor's hosted conversations, as a company writes one.

It receives ``conversation.message.created`` webhooks (Standard Webhooks signatures checked
with the independent ``standardwebhooks`` package) and answers through the ledger's company
API with its resource-server credential, while answering the webhook: it streams its reply
in pieces (``/deltas``), then posts the complete message. Asked about orders by a signed-out
user, it asks for sign-in with an ``authorization`` event naming the scope, and says so in a
message (PAP-7.11-01). The user's text is only compared, never run.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

ACCOUNT_PROMPT = "Where is my last order?"
ORDERS_SCOPE = "orders:read"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class SupportAgent:
    """An ASGI app: ``POST /webhooks/conversations``."""

    def __init__(self, *, ledger: str, credential: str, http: httpx.AsyncClient) -> None:
        self.ledger = ledger  # {ledger}/{slug}
        self.secret = ""
        self._auth = {"Authorization": f"Bearer {credential}"}
        self._http = http
        self.received: list[dict[str, Any]] = []

    async def _api(self, conversation_id: str, action: str, body: dict[str, Any]) -> None:
        r = await self._http.post(f"{self.ledger}/v1/conversations/{conversation_id}/{action}", json=body,
                                  headers=self._auth)
        if r.status_code >= 300 and r.status_code != 409:
            raise AssertionError(f"{action} answered {r.status_code}: {r.text[:200]}")

    async def answer(self, data: dict[str, Any]) -> None:
        conversation = data["conversation_id"]
        reply_id = "msg_re_" + data["event_id"]  # one reply per event, whatever the retries
        text = data["message"].get("text") or ""
        if text == ACCOUNT_PROMPT and data["account"] is None:
            await self._api(conversation, "authorization", {"scope": ORDERS_SCOPE, "error": "sign_in_required"})
            reply = "Please sign in to Northwind so I can look up your orders."
        elif text == ACCOUNT_PROMPT:
            reply = "Your last order, 2 x Chai, shipped on Monday."
        else:
            reply = "Hello from Northwind support. How can I help?"
        half = len(reply) // 2
        for piece in (reply[:half], reply[half:]):
            await self._api(conversation, "deltas", {"message_id": reply_id, "text": piece})
        await self._api(conversation, "messages", {"message": {"id": reply_id, "text": reply}, "sender": "agent"})

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        status = 204
        try:
            payload = Webhook(self.secret).verify(body, headers)
        except Exception:
            status = 401
        else:
            self.received.append(payload)
            if payload["type"] == "conversation.message.created":
                await self.answer(payload["data"])
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({}).encode()})
