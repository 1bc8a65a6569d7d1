"""The publish check: fetch a domain's live ``poppy.json`` the way an agent would and
report every mismatch with the document Frontdoor generated for it.

Steps (each failure is a finding with a stable code and a fix hint):

1. Fetch ``https://{domain}/.well-known/poppy.json`` through the SSRF-safe client:
   HTTPS only, HTTPS-only redirects (at most 3), size and time limits, no credentials.
2. Parse it strictly (duplicate members refused) and run the agent-side checks of PAP §3
   with the host that finally served it (``organization.domain`` must equal it).
3. Compare ``auth`` with the tenant's generated ``auth`` (PAP-3.2-06: identical for every
   domain of the issuer).
4. Fetch the issuer metadata the document names (RFC 8414 §3.1 location) and check that
   ``issuer`` equals ``auth.issuer`` exactly and ``poppy_domains`` lists the domain.
5. While the tenant serves PAP 1.0, also fetch ``https://{domain}/.well-known/oauth-protected-resource``
   (RFC 9728) the same way and cross-check the three documents (poppy.json, that document
   and the issuer metadata) character for character, as a 1.0 agent does [S §2]
   (`frontdoor_protocol.check_discovery_documents`): one finding per mismatch, source
   ``protected-resource``. (When the issuer metadata cannot be read, that is the finding;
   an agent stops there too.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
from frontdoor_core.outbound import FetchError, FetchResult
from frontdoor_protocol.authorization_server_metadata import metadata_url
from frontdoor_protocol.discovery_check import check_discovery_document
from frontdoor_protocol.discovery_cross_check import check_discovery_documents
from frontdoor_protocol.metadata_check import check_metadata
from frontdoor_protocol.strict_json import MalformedJSON, loads

from . import domain_claims, issuer_profile, issuer_settings, tenants

__all__ = [
    "CheckFinding",
    "PublishReport",
    "as_check_findings",
    "check_issuer_metadata",
    "check_paired_discovery",
    "check_served_document",
    "fetch_document",
    "finding_from_fetch",
    "run_publish_check",
]

_FETCH_HINTS: dict[str, tuple[str, str]] = {
    "not_https": ("The document must be served over HTTPS.", "Serve /.well-known/poppy.json over HTTPS."),
    "redirect_not_https": ("A redirect leads to a plain http:// URL.", "Redirect only to https:// URLs, or serve the file directly."),
    "too_many_redirects": ("More than 3 redirects.", "Serve the file directly from the domain."),
    "too_large": ("The document is larger than 100 KB.", "Publish exactly the generated document."),
    "timeout": ("The server took too long to answer.", "Make sure the file is served quickly (a static file is best)."),
    "not_json": ("The response is not JSON (Content-Type).", "Serve it with Content-Type: application/json."),
    "bad_status": ("The server did not answer 200.", "Publish the file at /.well-known/poppy.json on this exact host."),
    "blocked_address": ("The domain resolves to a private or loopback address.", "Agents only fetch public addresses; publish on a public host."),
    "mixed_answers": ("The domain resolves to public and private addresses.", "Remove the private addresses from DNS."),
    "dns_error": ("The domain does not resolve.", "Check the domain's A/AAAA records."),
    "tls_error": ("The TLS certificate is not valid for this host.", "Install a certificate that covers this exact host name."),
    "connect_error": ("Could not connect.", "Check that the web server is reachable on port 443."),
    "bad_url": ("The URL is not acceptable.", "Use the plain domain, no port or path."),
    "http_error": ("The HTTP exchange failed.", "Check the server's HTTP configuration."),
    "target_busy": ("Not fetched: this host had all the requests it gets from the scanner for now.",
                    "Scan again in a minute."),
}


class CheckFinding(msgspec.Struct, frozen=True, kw_only=True):
    """One problem the publish check found."""

    code: str
    severity: str
    message: str
    hint: str
    requirement: str = ""
    pointer: str = ""
    source: str = "poppy.json"


class PublishReport(msgspec.Struct, frozen=True, kw_only=True):
    """The publish check's answer."""

    domain: str
    url: str
    final_url: str | None
    checked_at: datetime
    ok: bool
    findings: list[CheckFinding]


def finding_from_fetch(exc: FetchError, source: str) -> CheckFinding:
    """The finding for a fetch that failed (``not_found`` for a 404), with its fix."""
    code = str(exc.code)
    message, hint = _FETCH_HINTS.get(code, ("The fetch failed.", "Check the server."))
    if code == "bad_status" and exc.status is not None:
        message = f"The server answered HTTP {exc.status}."
        if exc.status == 404:
            code = "not_found"
    return CheckFinding(code=code, severity="error", message=message, hint=hint, requirement="PAP-3.1-01",
                        source=source)


def as_check_findings(findings: list[Any], source: str) -> list[CheckFinding]:
    """`frontdoor_protocol` findings as check findings of ``source``."""
    return [CheckFinding(code=str(f.code), severity=str(f.severity), message=f.message, hint=f.hint,
                         requirement=f.requirement, pointer=f.pointer, source=source) for f in findings]


def _diff(expected: Any, actual: Any, pointer: str = "/auth") -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            out += _diff(expected.get(key), actual.get(key), f"{pointer}/{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list) and sorted(map(str, expected)) == sorted(map(str, actual)):
        return []
    return [] if expected == actual else [pointer]


async def fetch_document(fetcher: Any, url: str, source: str) -> tuple[Any, FetchResult | None, list[CheckFinding]]:
    """Fetch ``url`` as an agent would and parse it strictly: (document or None, the fetch, findings)."""
    try:
        result: FetchResult = await fetcher.fetch(url)
    except FetchError as exc:
        return None, None, [finding_from_fetch(exc, source)]
    try:
        return loads(result.body), result, []
    except MalformedJSON as exc:
        dup = "duplicate" in str(getattr(exc, "reason", exc))
        return None, result, [CheckFinding(
            code="duplicate_member" if dup else "malformed_json", severity="error",
            message="The document repeats a member." if dup else "The document is not valid JSON.",
            hint="Publish exactly the generated document.", requirement="PAP-3-01", source=source)]


async def run_publish_check(conn: asyncpg.Connection, tenant_id: str, raw_domain: str, *, fetcher: Any,
                            base_url: str, now: datetime, dev: bool = False) -> PublishReport:
    """Check the published document of one of the tenant's domains."""
    claim = await domain_claims.get_domain(conn, tenant_id, raw_domain)
    domain = claim.domain
    tenant = await tenants.get_tenant(conn, tenant_id)
    stored = await issuer_settings.get_settings(conn, tenant_id)
    urls = issuer_profile.issuer_urls(base_url, tenant.slug)
    expected_auth = msgspec.json.decode(msgspec.json.encode(issuer_profile.expected_auth(urls, stored.settings)))
    url = f"https://{domain}/.well-known/poppy.json"
    findings: list[CheckFinding] = []
    if claim.status != "verified":
        findings.append(CheckFinding(
            code="domain_not_verified", severity="error", message=f"The domain is {claim.status}, not verified.",
            hint="Publish the TXT record and verify the domain; only verified domains are listed in poppy_domains.",
            source="frontdoor"))
    doc, fetched, problems = await fetch_document(fetcher, url, "poppy.json")
    findings += problems
    final_url = fetched.final_url if fetched else None
    if doc is not None and fetched is not None:
        findings += check_served_document(doc, fetched, domain)
        auth = doc.get("auth") if isinstance(doc, dict) else None
        if isinstance(auth, dict):
            if auth.get("issuer") != urls.issuer:
                findings.append(CheckFinding(
                    code="issuer_mismatch", severity="error", pointer="/auth/issuer",
                    message="auth.issuer is not your Frontdoor issuer.",
                    hint=f"Set auth.issuer to exactly {urls.issuer}.", requirement="PAP-3.2-06"))
            differing = [p for p in _diff(expected_auth, auth) if p != "/auth/issuer"]
            if differing:
                findings.append(CheckFinding(
                    code="auth_differs", severity="error", pointer=differing[0],
                    message=f"auth differs from the generated document at {', '.join(differing[:5])}.",
                    hint="Publish the auth object exactly as GET /api/v1/domains/{domain}/poppy.json returns it.",
                    requirement="PAP-3.2-06"))
            issuer = auth.get("issuer")
            if isinstance(issuer, str):
                meta, _, problems = await check_issuer_metadata(fetcher, issuer, domain, dev=dev)
                findings += problems
                if meta is not None and stored.settings.protocol.serves("1.0"):
                    findings += await check_paired_discovery(fetcher, domain, doc, meta)
    ok = not any(f.severity == "error" for f in findings)
    return PublishReport(domain=domain, url=url, final_url=final_url, checked_at=now, ok=ok, findings=findings)


def check_served_document(doc: Any, fetched: FetchResult, domain: str) -> list[CheckFinding]:
    """The agent-side checks of a fetched ``poppy.json`` of ``domain`` (PAP §3), the serving host's included."""
    findings: list[CheckFinding] = []
    served_host = (urlsplit(fetched.final_url).hostname or "").lower()
    if served_host != domain:
        findings.append(CheckFinding(
            code="served_by_other_host", severity="error",
            message="The document was finally served by another host than the domain.",
            hint="Serve the file on the domain itself; a redirect to another host cannot speak for it.",
            requirement="PAP-3.1-02"))
    findings += as_check_findings(check_discovery_document(doc, served_host), "poppy.json")
    auth = doc.get("auth") if isinstance(doc, dict) else None
    if auth is None and isinstance(doc, dict) and not any(f.code == "auth_missing" for f in findings):
        findings.append(CheckFinding(
            code="auth_missing", severity="error", pointer="/auth",
            message="The document has no auth member, so agents will not use your Frontdoor issuer.",
            hint="Publish the generated document, auth included.", requirement="PAP-3.2-06"))
    return findings


async def check_issuer_metadata(fetcher: Any, issuer: str, domain: str, *,
                                dev: bool) -> tuple[Any, FetchResult | None, list[CheckFinding]]:
    """The issuer metadata (None when it could not be read), its fetch and its findings."""
    try:
        where = metadata_url(issuer, allow_http_loopback=dev)
    except ValueError:
        return None, None, [CheckFinding(code="invalid_issuer", severity="error", pointer="/auth/issuer",
                                         message="auth.issuer is not a valid issuer URL.",
                                         hint="Use your Frontdoor issuer URL.", requirement="PAP-3.2-07")]
    meta, fetched, problems = await fetch_document(fetcher, where, "issuer metadata")
    if problems:
        return None, fetched, problems
    return meta, fetched, as_check_findings(check_metadata(meta, issuer, domain), "issuer metadata")


_PROTECTED_RESOURCE = "protected-resource"


async def check_paired_discovery(fetcher: Any, domain: str, poppy: Any, metadata: Any) -> list[CheckFinding]:
    """PAP 1.0 paired discovery [S §2]: the protected-resource document against the other two."""
    url = f"https://{domain}/.well-known/oauth-protected-resource"
    resource, _, problems = await fetch_document(fetcher, url, _PROTECTED_RESOURCE)
    if problems:
        return problems
    found = check_discovery_documents(domain=domain, poppy=poppy, protected_resource=resource,
                                      authorization_server=metadata)
    return as_check_findings(list(found), _PROTECTED_RESOURCE)
