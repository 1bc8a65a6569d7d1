"""What Northwind needs to know to run: its Frontdoor issuer, credential, public URL and login key."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from frontdoor_sdk import Clock, login_signing_key
from joserfc.jwk import ECKey

ENV_VARS = ("NORTHWIND_ISSUER", "NORTHWIND_CREDENTIAL", "NORTHWIND_PUBLIC_URL", "NORTHWIND_POPPY_JSON")
OPTIONAL_ENV_VARS = (
    "NORTHWIND_SIGNING_KEY",
    "NORTHWIND_DEMO_PASSWORD",
    "NORTHWIND_LEDGER_URL",
    "NORTHWIND_WEBHOOK_SECRET",
)
DEFAULT_DEMO_PASSWORD = "northwind-demo"
"""The demo accounts' password when ``NORTHWIND_DEMO_PASSWORD`` is not set (dev only)."""


@dataclass(frozen=True, kw_only=True)
class NorthwindConfig:
    """Northwind's settings.

    Attributes:
        issuer: Your Frontdoor issuer, ``auth.issuer`` in ``poppy.json``.
        credential: Your resource-server credential (``fdrs_...``) from Frontdoor's console.
            A secret: it authenticates your introspection calls.
        public_url: The origin agents call, e.g. ``https://northwind.example``. DPoP proofs
            are checked against it, never against the ``Host`` header.
        poppy: The ``poppy.json`` document Frontdoor generated for your domain, as is.
        http_client: The client the sdk reaches Frontdoor with; tests route it to a fake.
        clock: The time source (timezone-aware); the system clock if omitted.
        signing_key: The private ES256 key login responses are signed with; its public
            part is served at ``/.well-known/jwks.json``. Generated when omitted, which
            only works while one process serves both.
        demo_password: The password of both demo accounts (:data:`catalog.DEMO_ACCOUNTS`).
        ledger_url: Frontdoor's ledger base URL with your slug, e.g.
            ``https://ledger.frontdoor.example/northwind`` (``make run``:
            ``http://127.0.0.1:8002/demo``). ``None`` (the default): Northwind proposes no
            operations, and its ordering routes, MCP tools and operation pages do not exist.
        webhook_secret: The perform webhook endpoint's secret (``whsec_...``), or several
            while rotating. ``None`` (the default): ``POST /webhooks/frontdoor`` does not exist.
        join_cookie_secret: MACs the cookie of PAP 1.0 joined browsers (``/poppy/join``);
            the same on every replica. Generated when omitted (one process only).
        expose_test_hooks: Serve ``GET /_test/performed/{operation_id}`` (how many times an
            operation was performed). Tests and conformance runs only; never in production.
    """

    issuer: str
    credential: str = field(repr=False)  # never in logs
    public_url: str
    poppy: Mapping[str, Any]
    http_client: httpx.AsyncClient | None = None
    clock: Clock | None = None
    signing_key: ECKey = field(default_factory=login_signing_key, repr=False)
    demo_password: str = field(default=DEFAULT_DEMO_PASSWORD, repr=False)
    ledger_url: str | None = None
    webhook_secret: str | tuple[str, ...] | None = field(default=None, repr=False)  # a secret
    expose_test_hooks: bool = False
    join_cookie_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)  # a secret

    def __post_init__(self) -> None:
        parts = urlsplit(self.public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ValueError("public_url must be an origin such as https://northwind.example")
        if parts.query or parts.fragment:
            raise ValueError("public_url must have no query or fragment")
        if not self.demo_password:
            raise ValueError("demo_password must not be empty")
        if self.ledger_url is not None and (not self.ledger_url or self.ledger_url.endswith("/")):
            raise ValueError("ledger_url must be the ledger base URL with the slug, without a trailing slash")
        if self.webhook_secret is not None and not self.webhook_secrets:
            raise ValueError("webhook_secret must not be empty")

    @property
    def webhook_secrets(self) -> tuple[str, ...]:
        """``webhook_secret`` as a tuple (empty when unset)."""
        if self.webhook_secret is None:
            return ()
        if isinstance(self.webhook_secret, str):
            return (self.webhook_secret,) if self.webhook_secret else ()
        return tuple(self.webhook_secret)

    @property
    def operation_page_url(self) -> str:
        """An operation's page, ``{operation_id}`` replaced by Frontdoor: the operation's ``url``."""
        return f"{self.origin}/operations/{{operation_id}}"

    @property
    def webhook_url(self) -> str:
        """Where Frontdoor delivers the perform webhook: the operation kind's endpoint."""
        return f"{self.origin}/webhooks/frontdoor"

    @property
    def origin(self) -> str:
        """``public_url`` without a trailing slash."""
        return self.public_url.rstrip("/")

    @property
    def login_url(self) -> str:
        """The login page Frontdoor sends users to: the tenant's ``login.url``."""
        return f"{self.origin}/login"

    @property
    def jwks_uri(self) -> str:
        """Where the login key is published: the tenant's ``login.jwks_uri``."""
        return f"{self.origin}/.well-known/jwks.json"

    @property
    def mcp_url(self) -> str:
        """The MCP server's ``url``: what ``poppy.json`` lists and MCP tokens are bound to."""
        return f"{self.origin}/mcp"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NorthwindConfig:
        """The configuration from ``NORTHWIND_*`` environment variables (see :mod:`northwind.asgi`).

        ``NORTHWIND_SIGNING_KEY`` (a private EC P-256 JWK) and ``NORTHWIND_DEMO_PASSWORD``
        are optional: a key is generated and :data:`DEFAULT_DEMO_PASSWORD` used without them.
        ``NORTHWIND_LEDGER_URL`` turns operations on; ``NORTHWIND_WEBHOOK_SECRET`` (several
        separated by spaces or commas while rotating) turns the perform webhook on.

        Raises:
            RuntimeError: If a variable is missing, ``poppy.json`` is not a JSON object or
                the signing key is not a private EC P-256 JWK.
        """
        missing = [name for name in ENV_VARS if not environ.get(name)]
        if missing:
            raise RuntimeError(f"set {', '.join(missing)}")
        poppy = json.loads(Path(environ["NORTHWIND_POPPY_JSON"]).read_text(encoding="utf-8"))
        if not isinstance(poppy, dict):
            raise RuntimeError("NORTHWIND_POPPY_JSON must name a file holding a JSON object")
        return cls(
            issuer=environ["NORTHWIND_ISSUER"],
            credential=environ["NORTHWIND_CREDENTIAL"],
            public_url=environ["NORTHWIND_PUBLIC_URL"],
            poppy=poppy,
            signing_key=_signing_key(environ.get("NORTHWIND_SIGNING_KEY")),
            demo_password=environ.get("NORTHWIND_DEMO_PASSWORD") or DEFAULT_DEMO_PASSWORD,
            ledger_url=environ.get("NORTHWIND_LEDGER_URL") or None,
            webhook_secret=tuple(environ.get("NORTHWIND_WEBHOOK_SECRET", "").replace(",", " ").split()) or None,
        )


def _signing_key(value: str | None) -> ECKey:
    if not value:
        return login_signing_key()
    try:
        jwk = json.loads(value)
        if not isinstance(jwk, dict):
            raise ValueError("not a JSON object")
        return login_signing_key(jwk)
    except ValueError:
        # Never echo the value: it is a private key.
        raise RuntimeError("NORTHWIND_SIGNING_KEY must be a private EC P-256 JWK (JSON)") from None
