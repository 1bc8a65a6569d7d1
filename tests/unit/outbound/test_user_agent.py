"""Every outbound request names the deployment that sent it, never a site nobody serves."""

from __future__ import annotations

import msgspec
from frontdoor_core.outbound import DEFAULT_USER_AGENT, OutboundPolicy, user_agent
from frontdoor_core.settings import Settings
from frontdoor_tenancy.scanner import scanner_policy, scanner_user_agent
from frontdoor_webhooks.delivery_policy import webhook_outbound_policy


def test_the_user_agent_names_the_page_given_or_nothing() -> None:
    assert user_agent("https://console.acme.example") == "Frontdoor/0.1 (+https://console.acme.example)"
    assert user_agent("") == "Frontdoor/0.1"
    assert OutboundPolicy().user_agent == DEFAULT_USER_AGENT == "Frontdoor/0.1"


def test_the_scanner_names_its_docs_page_or_its_own_page() -> None:
    assert scanner_user_agent(console_base_url="https://console.acme.example/") == \
        "Frontdoor-Scanner/0.1 (+https://console.acme.example/scan)"
    assert scanner_user_agent(console_base_url="https://console.acme.example",
                              docs_base_url="https://git.acme.example/frontdoor/docs/") == \
        "Frontdoor-Scanner/0.1 (+https://git.acme.example/frontdoor/docs/scanner.md)"
    assert scanner_policy().user_agent == "Frontdoor-Scanner/0.1"


def test_webhook_deliveries_name_the_console() -> None:
    settings = msgspec.structs.replace(Settings(), console_base_url="https://console.acme.example")
    assert webhook_outbound_policy(settings).user_agent == "Frontdoor/0.1 (+https://console.acme.example)"
