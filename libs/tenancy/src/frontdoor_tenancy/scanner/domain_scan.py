"""Scan any domain as a personal agent would, without an account: the public scanner.

It composes the publish check's pieces (`frontdoor_tenancy.publish_check`: the strict
fetch, the agent-side ``poppy.json`` checks, the issuer metadata check with its
``poppy_domains`` agreement, the PAP 1.0 three-document cross-check) with what only an
outside view adds: caching headers (`caching`), the JWKS (`jwks_check`), whether the
advertised sign-in endpoints and the listed OpenAPI/MCP servers answer at all. Unlike the
publish check it compares with nothing Frontdoor generated: any issuer may be scanned.

Every fetch goes through a `ScanBudget`; once it is spent, what is left is reported as
``not_checked`` rather than fetched.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Final

import msgspec
from frontdoor_core.outbound import FetchError, FetchErrorCode

from ..publish_check import (
    CheckFinding,
    check_issuer_metadata,
    check_paired_discovery,
    check_served_document,
    fetch_document,
    finding_from_fetch,
)
from .budget import BudgetSpent, ScanBudget
from .caching import check_caching
from .jwks_check import check_jwks
from .score import CHECKS, ScanCheck, ScanFinding, ScanReport, summarise

__all__ = ["MAX_LISTINGS", "run_scan"]

MAX_LISTINGS: Final = 4
"""Listed APIs (OpenAPI or MCP) probed per scan; more are reported as not checked."""
_SIGN_IN_ENDPOINTS: Final = (("device_authorization_endpoint", "Device Sign-In"),
                             ("authorization_endpoint", "Direct Sign-In"))


class _Scan:
    def __init__(self, budget: ScanBudget, domain: str) -> None:
        self.budget = budget
        self.domain = domain
        self.findings: list[CheckFinding] = []
        self.reached: set[str] = set()

    def not_checked(self, what: str, source: str, reason: str) -> None:
        why = "it used all its fetches" if reason == "fetches" else "it ran out of time"
        self.findings.append(CheckFinding(
            code="not_checked", severity="info", source=source,
            message=f"{what} was not checked: the scan stopped there because {why}.",
            hint="Fix the findings above first; a scan makes at most 10 fetches in 20 seconds."))

    async def probe(self, url: str, source: str, what: str) -> None:
        """Whether ``url`` answers at all: any status but 404, 410 or a 5xx counts as reachable."""
        self.reached.add(source)
        try:
            await self.budget.fetch(url, accept_json=False)
        except FetchError as exc:
            if exc.code == FetchErrorCode.BAD_STATUS and exc.status is not None \
                    and exc.status < 500 and exc.status not in (404, 410):
                return
            if exc.code == FetchErrorCode.TOO_LARGE:
                return  # it answered; the scanner reads no more than it needs
            found = finding_from_fetch(exc, source)
            self.findings.append(msgspec.structs.replace(
                found, code="unreachable" if exc.code == FetchErrorCode.BAD_STATUS else found.code,
                message=f"{what} ({url[:120]}): {found.message}",
                hint="Make sure the URL you advertise answers on the public internet."))

    async def run(self) -> Any:
        url = f"https://{self.domain}/.well-known/poppy.json"
        self.reached.add("poppy.json")
        doc, fetched, problems = await fetch_document(self.budget, url, "poppy.json")
        self.findings += problems
        if doc is None or fetched is None:
            return fetched
        self.findings += check_served_document(doc, fetched, self.domain)
        self.findings += check_caching(fetched.headers, "poppy.json")
        auth = doc.get("auth") if isinstance(doc, dict) else None
        issuer = auth.get("issuer") if isinstance(auth, dict) else None
        meta: Any = None
        if isinstance(issuer, str):
            self.reached.add("issuer metadata")
            meta, meta_fetch, problems = await check_issuer_metadata(self.budget, issuer, self.domain, dev=False)
            self.findings += problems
            if meta is not None and meta_fetch is not None:
                self.findings += check_caching(meta_fetch.headers, "issuer metadata")
        if isinstance(meta, dict):
            await self.jwks(meta)
            if isinstance(doc, dict) and doc.get("protocol_version") == "1.0":
                self.reached.add("protected-resource")
                self.findings += await check_paired_discovery(self.budget, self.domain, doc, meta)
            for member, label in _SIGN_IN_ENDPOINTS:
                if isinstance(meta.get(member), str):
                    await self.probe(meta[member], "sign-in", f"The {label} endpoint")
        await self.listings(doc.get("apis") if isinstance(doc, dict) else None)
        return fetched

    async def jwks(self, meta: dict[str, Any]) -> None:
        uri = meta.get("jwks_uri")
        if not isinstance(uri, str):
            return  # check_metadata already reported the missing member
        self.reached.add("jwks")
        keys, _, problems = await fetch_document(self.budget, uri, "jwks")
        self.findings += problems or check_jwks(keys)

    async def listings(self, apis: Any) -> None:
        entries = [a for a in apis if isinstance(a, dict) and a.get("type") in ("openapi", "mcp")
                   and isinstance(a.get("url"), str)] if isinstance(apis, list) else []
        for index, api in enumerate(entries):
            if index >= MAX_LISTINGS:
                self.not_checked(f"The API at {api['url'][:120]}", "listings", "fetches")
                continue
            self.reached.add("listings")
            if api["type"] == "mcp":
                await self.probe(api["url"], "listings", "The MCP server")
                continue
            listing, _, problems = await fetch_document(self.budget, api["url"], "listings")
            self.findings += [msgspec.structs.replace(p, message=f"The OpenAPI document ({api['url'][:120]}): {p.message}",
                                                      hint="Serve the OpenAPI document you list as public JSON.")
                              for p in problems]
            if listing is not None and not (isinstance(listing, dict) and ("openapi" in listing or "swagger" in listing)):
                self.findings.append(CheckFinding(
                    code="not_openapi", severity="warning", source="listings", requirement="PAP-6-01",
                    message=f"The document at {api['url'][:120]} has no openapi member.",
                    hint="List the URL of the OpenAPI document itself."))


async def run_scan(budget: ScanBudget, domain: str, *, now: datetime) -> ScanReport:
    """Scan ``domain`` (already a valid, normalised name) within ``budget``.

    Returns:
        The report: the score, every finding with its fix, and which checks ran.
    """
    started = time.monotonic()
    scan = _Scan(budget, domain)
    fetched = None
    try:
        fetched = await scan.run()
    except BudgetSpent as spent:
        remaining = [label for source, label in CHECKS if source not in scan.reached]
        scan.not_checked(", ".join(remaining) or "The rest", "scan", spent.reason)
    findings = [ScanFinding.of(f) for f in scan.findings]
    checks: list[ScanCheck] = [ScanCheck.of(source, label, findings, source in scan.reached)
                               for source, label in CHECKS]
    return summarise(domain=domain, url=f"https://{domain}/.well-known/poppy.json",
                     final_url=fetched.final_url if fetched is not None else None,
                     redirects=len(fetched.redirect_chain) - 1 if fetched is not None else 0,
                     scanned_at=now, findings=findings, checks=checks, fetches=budget.fetches,
                     elapsed_ms=int((time.monotonic() - started) * 1000))
