"""A ledger's relay fast path as a child process, for the SIGKILL tests of the conversation relay.

It does what ``ConversationsHub`` does for an agent's first message in the relay mode: the
message, its relay written and claimed in one transaction (``store.start`` with a
``RelayTarget``), then one attempt at the relay (``relay_message``). It prints
``recorded <conversation_id> <relay message id>`` once the transaction committed. With
``--die-after-commit`` it kills itself with SIGKILL right then (recorded, never relayed);
otherwise the test kills it while the company holds the relay's request.

Arguments: one JSON object (``database_url``, ``kek``, ``tenant_id``, ``endpoint_id``,
``lease_seconds``, ``timeout_seconds``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta

from frontdoor_conversations import IncomingMessage, store
from frontdoor_conversations.relay import RelayTarget
from frontdoor_conversations.relay_delivery import relay_message
from frontdoor_conversations.rules import Caller
from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy
from frontdoor_webhooks.sender import SafeSender


async def main(config: dict[str, str | float], die_after_commit: bool) -> None:
    policy = DeliveryPolicy(retry=RetryPolicy(schedule=(timedelta(0),)),
                            timeout=timedelta(seconds=float(config["timeout_seconds"])),
                            lease=timedelta(seconds=float(config["lease_seconds"])))
    pool = await create_pool(str(config["database_url"]), min_size=1, max_size=2)
    caller = Caller(client_id="https://agent.example/client", user_id="usr_relay_kill", session_id="ses_relay_kill")
    target = RelayTarget(endpoint_id=str(config["endpoint_id"]), lease=policy.lease)
    async with pool.acquire() as conn:
        posted = await store.start(conn, str(config["tenant_id"]), caller,
                                   IncomingMessage(id="m-kill-1", sender="agent", text="Where is my order?"),
                                   parent_id=None, now=utc_now(), relay=target)
    assert posted.relay is not None
    print("recorded", posted.conversation.id, posted.relay.id, flush=True)
    if die_after_commit:
        os.kill(os.getpid(), signal.SIGKILL)
    sender = SafeSender(SafeFetcher(OutboundPolicy(allow_http_loopback=True)))
    await relay_message(pool, None, posted.relay, sender=sender, kek=Kek.from_env_value(str(config["kek"])),
                        clock=utc_now, policy=policy)
    print("relayed", flush=True)  # only if nobody killed this process
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1]), "--die-after-commit" in sys.argv[2:]))
