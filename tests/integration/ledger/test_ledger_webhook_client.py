"""The ledger's own POSTs to tenants' webhook endpoints (the perform fast path, first
conversation deliveries) follow the webhook rules, as the deliverer's do: in production (no
injected fetcher) the ledger sends them with `frontdoor_ledger.app.webhook_sender`, the
deliverer's `DeliveryClient` under ``FRONTDOOR_WEBHOOK_ALLOWLIST``, never under the outbound
allowlist of Frontdoor's own fetches of agent metadata.
"""

from __future__ import annotations

import msgspec
import pytest
from frontdoor_core.settings import Settings
from frontdoor_ledger.app import webhook_sender
from frontdoor_webhooks.delivery_outcome import ErrorClass
from frontdoor_webhooks.sender import SendError

_PRIVATE = "https://10.255.255.1/webhooks/frontdoor"
_HEADERS = {"content-type": "application/json"}


async def test_the_outbound_allowlist_does_not_open_private_networks_to_tenant_webhooks(settings: Settings) -> None:
    opened = msgspec.structs.replace(settings, outbound_allowlist="10.0.0.0/8", webhook_allowlist="")
    assert opened.allowlist() == ("10.0.0.0/8",)
    sender, client = webhook_sender(opened)
    try:
        with pytest.raises(SendError) as refused:
            await sender.post(_PRIVATE, b"{}", _HEADERS, 5.0)
        # refused before any connection: a blocked address, not a connect error or a timeout
        assert refused.value.error_class == ErrorClass.BLOCKED_ADDRESS
    finally:
        await client.aclose()


async def test_the_webhook_allowlist_is_what_lets_a_tenant_webhook_reach_a_private_network(
        settings: Settings) -> None:
    opened = msgspec.structs.replace(settings, outbound_allowlist="", webhook_allowlist="10.255.255.0/24")
    sender, client = webhook_sender(opened)
    try:
        with pytest.raises(SendError) as failed:
            await sender.post(_PRIVATE, b"{}", _HEADERS, 0.5)
        # allowed by the rules, so it was dialled: whatever answers there (nothing, or a sandbox's
        # interceptor with a certificate nobody trusts), the failure is the network's, not the rules'
        assert failed.value.error_class in (ErrorClass.TIMEOUT, ErrorClass.CONNECT, ErrorClass.TLS)
    finally:
        await client.aclose()
