"""What Northwind needs to know to run: its Frontdoor issuer, credential and public URL."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from frontdoor_sdk import Clock

ENV_VARS = ("NORTHWIND_ISSUER", "NORTHWIND_CREDENTIAL", "NORTHWIND_PUBLIC_URL", "NORTHWIND_POPPY_JSON")


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
    """

    issuer: str
    credential: str = field(repr=False)  # never in logs
    public_url: str
    poppy: Mapping[str, Any]
    http_client: httpx.AsyncClient | None = None
    clock: Clock | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise ValueError("public_url must be an origin such as https://northwind.example")
        if parts.query or parts.fragment:
            raise ValueError("public_url must have no query or fragment")

    @property
    def origin(self) -> str:
        """``public_url`` without a trailing slash."""
        return self.public_url.rstrip("/")

    @property
    def mcp_url(self) -> str:
        """The MCP server's ``url``: what ``poppy.json`` lists and MCP tokens are bound to."""
        return f"{self.origin}/mcp"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> NorthwindConfig:
        """The configuration from ``NORTHWIND_*`` environment variables (see :mod:`northwind.asgi`).

        Raises:
            RuntimeError: If a variable is missing or ``poppy.json`` is not a JSON object.
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
        )
