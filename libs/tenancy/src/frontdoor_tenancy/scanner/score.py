"""A scan's report: the findings with where their fix is documented, the checks, a score.

The score is 100, less 20 for each error and 5 for each warning, never below 0. A domain
with no error is ``ok``: agents can use it. ``info`` findings (a check the budget left
out) cost nothing but make the report ``complete = False``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec

from ..publish_check import CheckFinding

__all__ = ["CHECKS", "SCANNER_CODES", "ScanCheck", "ScanFinding", "ScanReport", "doc_for", "score_of", "summarise"]

CHECKS: Final = (
    ("poppy.json", "poppy.json (schema, redirects, host, caching)"),
    ("issuer metadata", "Issuer metadata (poppy_domains, caching)"),
    ("jwks", "JWKS"),
    ("protected-resource", "Protected-resource metadata (PAP 1.0)"),
    ("sign-in", "Sign-in endpoints"),
    ("listings", "OpenAPI and MCP listings"),
)
"""(source, label) of every check, in the order a scan runs them."""

SCANNER_CODES: Final = frozenset({
    "cache_disabled", "cache_headers_missing", "cache_too_short", "cache_too_long", "jwks_invalid", "jwks_empty",
    "jwks_private_key", "jwks_no_es256_key", "unreachable", "not_openapi", "not_checked", "target_busy",
})
"""Codes only the scanner reports (docs/scanner.md); every other code is the publish check's."""

_ERROR_COST: Final = 20
_WARNING_COST: Final = 5


def doc_for(code: str) -> str:
    """The docs page and anchor that say how to fix a finding with ``code``."""
    if code in SCANNER_CODES:
        return f"scanner.md#{code.replace('_', '-')}"
    return "poppy-json.md#publish-check-findings"


class ScanFinding(msgspec.Struct, frozen=True, kw_only=True):
    """A `CheckFinding` with the docs page of its fix."""

    code: str
    severity: str
    message: str
    hint: str
    requirement: str = ""
    pointer: str = ""
    source: str = "poppy.json"
    doc: str = ""

    @classmethod
    def of(cls, finding: CheckFinding) -> ScanFinding:
        return cls(code=finding.code, severity=finding.severity, message=finding.message, hint=finding.hint,
                   requirement=finding.requirement, pointer=finding.pointer, source=finding.source,
                   doc=doc_for(finding.code))


class ScanCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One check of the scan: ``pass``, ``warn``, ``fail``, or ``skipped`` (not reached)."""

    source: str
    label: str
    status: str

    @classmethod
    def of(cls, source: str, label: str, findings: list[ScanFinding], reached: bool) -> ScanCheck:
        mine = {f.severity for f in findings if f.source == source}
        status = ("fail" if "error" in mine else "warn" if "warning" in mine else
                  "pass" if reached else "skipped")
        return cls(source=source, label=label, status=status)


class ScanReport(msgspec.Struct, frozen=True, kw_only=True):
    """What the scanner answers (``GET /api/v1/scan``) and caches."""

    domain: str
    url: str
    final_url: str | None
    redirects: int
    scanned_at: datetime
    score: int
    ok: bool
    complete: bool
    errors: int
    warnings: int
    findings: list[ScanFinding]
    checks: list[ScanCheck]
    fetches: int
    elapsed_ms: int


def score_of(findings: list[ScanFinding]) -> int:
    """100 less 20 per error and 5 per warning, at least 0."""
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    return max(0, 100 - _ERROR_COST * errors - _WARNING_COST * warnings)


def summarise(*, domain: str, url: str, final_url: str | None, redirects: int, scanned_at: datetime,
              findings: list[ScanFinding], checks: list[ScanCheck], fetches: int, elapsed_ms: int) -> ScanReport:
    """The report of a finished scan."""
    errors = sum(f.severity == "error" for f in findings)
    return ScanReport(domain=domain, url=url, final_url=final_url, redirects=redirects, scanned_at=scanned_at,
                      score=score_of(findings), ok=errors == 0, complete=not any(f.code == "not_checked" for f in findings),
                      errors=errors, warnings=sum(f.severity == "warning" for f in findings), findings=findings,
                      checks=checks, fetches=fetches, elapsed_ms=elapsed_ms)
