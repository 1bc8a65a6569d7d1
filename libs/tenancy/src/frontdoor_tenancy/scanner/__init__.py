"""The public domain scanner: any domain checked as a personal agent would, within strict budgets."""

from __future__ import annotations

from .budget import (
    MAX_FETCHES,
    MAX_REDIRECTS,
    SCAN_DEADLINE,
    SCANNER_USER_AGENT,
    BudgetSpent,
    ScanBudget,
    scanner_policy,
    scanner_user_agent,
)
from .caching import check_caching
from .domain_scan import MAX_LISTINGS, run_scan
from .jwks_check import check_jwks
from .score import CHECKS, SCANNER_CODES, ScanCheck, ScanFinding, ScanReport, doc_for, score_of

__all__ = [
    "CHECKS",
    "MAX_FETCHES",
    "MAX_LISTINGS",
    "MAX_REDIRECTS",
    "SCANNER_CODES",
    "SCANNER_USER_AGENT",
    "SCAN_DEADLINE",
    "BudgetSpent",
    "ScanBudget",
    "ScanCheck",
    "ScanFinding",
    "ScanReport",
    "check_caching",
    "check_jwks",
    "doc_for",
    "run_scan",
    "scanner_policy",
    "scanner_user_agent",
    "score_of",
]
