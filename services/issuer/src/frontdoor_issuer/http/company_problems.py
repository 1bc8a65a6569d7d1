"""How the issuer refuses a company's servers at ``{issuer}/accounts/*``: RFC 9457 problems.

The account routes (``GET /accounts/{account}/agents``, ``POST /accounts/disconnect``)
are a company API like the ledger's ``/v1`` and the console's management API, so they
answer ``application/problem+json`` ``{type, title, status, code, detail, request_id}``.
The protocol endpoints keep the OAuth shape ``{"error", "error_description"}``, RFC 7662
introspection among them.
"""

from __future__ import annotations

from typing import Any

from frontdoor_httpkit import problem
from litestar import Response

__all__ = ["account_problem", "credential_refused", "is_account_path", "no_issuer"]

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-accounts"'}


def is_account_path(path: str) -> bool:
    """Whether ``path`` is under ``/{slug}/accounts/``."""
    parts = path.split("/", 3)
    return len(parts) > 3 and parts[2] == "accounts"


def account_problem(status: int, code: str, detail: str,
                    headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    """A problem-details refusal of the account routes, never cached."""
    return problem(status, code, detail, headers={**_NO_STORE, **(headers or {})})


def credential_refused() -> Response[dict[str, Any]]:
    """``401 invalid_client`` with the ``Bearer`` challenge."""
    return account_problem(401, "invalid_client", "Authenticate with a resource-server credential.", _CHALLENGE)


def no_issuer() -> Response[dict[str, Any]]:
    """An unknown tenant: ``404 not_found``, as for any unknown issuer path."""
    return account_problem(404, "not_found", "No issuer at this address.")
