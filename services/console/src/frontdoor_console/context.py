"""Per-process dependencies of the console, stored on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.credentials.key_encryption import Kek

__all__ = ["ConsoleContext"]


@dataclass
class ConsoleContext:
    """Everything handlers need beyond the request.

    Attributes:
        runtime: pool, Redis, clock, settings.
        kek: decrypts and encrypts secrets at rest.
        txt_lookup: DNS TXT resolver (injectable for tests).
        fetcher: SSRF-safe outbound client (publish checks).
        scanner_fetcher: the public scanner's own SSRF-safe client (`frontdoor_tenancy.scanner.scanner_policy`:
            public addresses only, never the outbound allowlist).
    """

    runtime: Runtime
    kek: Kek
    txt_lookup: Any
    fetcher: Any
    scanner_fetcher: Any = None

    @property
    def settings(self) -> Any:
        return self.runtime.settings

    @property
    def pool(self) -> Any:
        return self.runtime.pool

    @property
    def redis(self) -> Any:
        return self.runtime.redis

    def now(self) -> Any:
        return self.runtime.clock()

    def issuer_url(self, slug: str) -> str:
        """A tenant's issuer identifier."""
        return f"{self.runtime.settings.issuer_base_url}/{slug}"
