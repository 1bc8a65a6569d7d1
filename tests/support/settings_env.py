"""The environment the test session's ``settings`` fixture is loaded from (tests/conftest.py).

One list for the in-process apps and for a Frontdoor process a test starts itself
(`tests.support.granian_app.service_env`), so both read and write the same rows.
"""

from __future__ import annotations

from tests.support.dns_server import LocalDNS
from tests.support.servers import Servers


def settings_env(servers: Servers, dns: LocalDNS, kek_value: str) -> dict[str, str]:
    """The worker's PostgreSQL and Redis, its nameserver and KEK, the public base URLs, the test limits."""
    return {
        "FRONTDOOR_ENV": "test",
        "DATABASE_URL": servers.database_url,
        "REDIS_URL": servers.redis_url,
        "FRONTDOOR_KEK": kek_value,
        "FRONTDOOR_DNS_NAMESERVERS": f"127.0.0.1:{dns.port}",
        "FRONTDOOR_DNS_TIMEOUT": "1s",
        "FRONTDOOR_ISSUER_BASE_URL": "https://issuer.frontdoor.test",
        "FRONTDOOR_CONSOLE_BASE_URL": "https://console.frontdoor.test",
        "FRONTDOOR_LEDGER_BASE_URL": "https://ledger.frontdoor.test",
        "FRONTDOOR_SIGNUP_RATE_LIMIT": "100000",
        # Every test's browser is the same "testclient" address: the per-email limits still apply.
        "FRONTDOOR_LOGIN_NETWORK_RATE_LIMIT": "100000",
    }
