"""The OpenAPI documents checked in under docs/api/ are what the apps generate.

Each is Litestar's document built from the route handlers (the console's, the ledger's, the
issuer's); ``scripts/export_openapi.py`` writes them and ``--check`` fails on any drift.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "export_openapi.py"


def test_the_checked_in_documents_are_what_the_apps_generate() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.count("is up to date") == 3


def test_a_stale_document_is_reported(tmp_path: Path) -> None:
    stale = tmp_path / "ledger.json"
    stale.write_text('{"openapi": "3.1.0", "paths": {}}\n', "utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), "ledger", "--output", str(stale), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "is stale" in done.stderr


def test_each_document_describes_its_company_facing_routes_and_their_security() -> None:
    ledger = json.loads((ROOT / "docs" / "api" / "openapi-ledger.json").read_text("utf-8"))
    issuer = json.loads((ROOT / "docs" / "api" / "openapi-issuer.json").read_text("utf-8"))
    for path in ("/{slug}/operations/{operation_id}", "/{slug}/operations/{operation_id}/confirm",
                 "/{slug}/operations/{operation_id}/cancel", "/{slug}/v1/operations",
                 "/{slug}/v1/operations/{operation_id}/outcome", "/{slug}/v1/conversations"):
        assert path in ledger["paths"], path
    assert set(ledger["components"]["securitySchemes"]) == {"dpopSession", "poppySession", "resourceCredential"}
    confirm = ledger["paths"]["/{slug}/operations/{operation_id}/confirm"]["post"]
    assert confirm["security"] == [{"dpopSession": []}, {"poppySession": []}]
    assert "application/json" in confirm["responses"]["409"]["content"]
    propose = ledger["paths"]["/{slug}/v1/operations"]["post"]
    assert propose["security"] == [{"resourceCredential": []}]
    assert propose["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ProposeBody"}
    assert "application/problem+json" in propose["responses"]["409"]["content"]
    for path in ("/{slug}/accounts/{account}/agents", "/{slug}/accounts/disconnect", "/{slug}/oauth/introspect"):
        assert path in issuer["paths"], path
    agents = issuer["paths"]["/{slug}/accounts/{account}/agents"]["get"]
    assert agents["security"] == [{"resourceCredential": []}]
    assert "application/problem+json" in agents["responses"]["401"]["content"]
    introspect = issuer["paths"]["/{slug}/oauth/introspect"]["post"]
    assert "application/x-www-form-urlencoded" in introspect["requestBody"]["content"]
    assert "application/json" in introspect["responses"]["401"]["content"]  # RFC 7662: OAuth shaped
