"""The public domain scanner: ``/scan``, ``/scan/{domain}`` and ``GET /api/v1/scan?domain=``.

No account. A fresh scan costs the client's network (`frontdoor_httpkit.client_address`)
one of its ``FRONTDOOR_SCANNER_RATE_LIMIT`` scans per hour; the result is kept in Redis
for ``FRONTDOOR_SCANNER_CACHE_TTL`` and served to anyone asking for the same domain
meanwhile (so a shared ``/scan/{domain}`` link costs nothing and sends nothing). One scan
of a domain runs at a time (a Redis lock); every request a scan sends is counted against
its host (``FRONTDOOR_SCANNER_TARGET_RATE_LIMIT`` a minute, all scans together). Redis
down: the scanner refuses (503), since it could neither limit nor cache.

The page is server-rendered and works without JavaScript: the form is a plain GET.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import msgspec
import structlog
from frontdoor_core.errors import DomainError, Invalid, Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_keys import shard
from frontdoor_httpkit import client_address
from frontdoor_tenancy.domains.domain_name import InvalidDomain, normalize_domain
from frontdoor_tenancy.scanner import ScanBudget, ScanReport, run_scan
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from ..access import PUBLIC, opt
from ..context import ConsoleContext
from .deps import ctx_of, rate_limit
from .problems import PUBLIC_PROBLEMS

__all__ = ["routes", "scan"]

_RESULT_KEY: Final = "scan:result:v1:"
_LOCK_KEY: Final = "scan:lock:"
_LOCK_S: Final = 30
_log = structlog.get_logger("frontdoor.scanner")


def _domain(raw: str) -> str:
    try:
        return normalize_domain(raw)
    except InvalidDomain as exc:
        raise Invalid("invalid_domain", "Enter a domain name such as shop.example.com (no scheme, path or IP address).",
                      ) from exc


def _admit(ctx: ConsoleContext) -> Any:
    async def admit(host: str) -> bool:
        try:
            allowed, _ = await hit(ctx.redis, f"scan:target:{shard(host)}", limit=ctx.settings.scanner_target_rate_limit,
                                   window_s=60)
        except Exception:
            return False  # fail closed: no limiter, no request
        return allowed

    return admit


async def scan(ctx: ConsoleContext, request: Request[Any, Any, Any], raw: str) -> tuple[ScanReport, bool]:
    """The report for ``raw`` (a domain) and whether it came from the cache.

    Raises:
        Invalid: ``invalid_domain``.
        RateLimited: ``rate_limited``: the client's network used its fresh scans.
        Unavailable: ``scan_in_progress`` (another request is scanning it) or
            ``scanner_unavailable`` (Redis cannot answer).
    """
    domain = _domain(raw)
    redis = ctx.redis
    try:
        cached = await redis.get(_RESULT_KEY + shard(domain))
    except Exception:
        raise Unavailable("scanner_unavailable", "The scanner is unavailable; try again in a moment.") from None
    if cached is not None:
        return msgspec.json.decode(cached, type=ScanReport), True
    client = client_address(request, ctx.settings.trusted_proxies)
    await rate_limit(ctx, f"scan:{shard(client)}", limit=ctx.settings.scanner_rate_limit, window_s=3600)
    try:
        locked = await redis.set(_LOCK_KEY + shard(domain), b"1", nx=True, ex=_LOCK_S)
    except Exception:
        raise Unavailable("scanner_unavailable", "The scanner is unavailable; try again in a moment.") from None
    if not locked:
        raise Unavailable("scan_in_progress", "This domain is being scanned right now; reload in a few seconds.",
                          retry_after=3)
    try:
        report = await run_scan(ScanBudget(ctx.scanner_fetcher, admit=_admit(ctx)), domain, now=ctx.now())
        ttl = max(int(ctx.settings.scanner_cache_ttl.total_seconds()), 1)
        await redis.set(_RESULT_KEY + shard(domain), msgspec.json.encode(report), ex=ttl)
    finally:
        try:
            await redis.delete(_LOCK_KEY + shard(domain))
        except Exception:
            _log.warning("scan_lock_not_released", domain=domain)  # it lapses after _LOCK_S
    _log.info("domain_scanned", domain=domain, score=report.score, fetches=report.fetches, elapsed_ms=report.elapsed_ms)
    return report, False


def _page(status: int, **context: Any) -> Template:
    return Template("scan.html", status_code=status, context={"value": "", **context},
                    headers={"Cache-Control": "no-store"})


@get("/scan", opt=opt(PUBLIC), include_in_schema=False)
async def scan_form(domain: str | None = Parameter(default=None, max_length=1024)) -> Response[Any]:
    """The form; submitted (``?domain=``) it redirects to the shareable ``/scan/{domain}``."""
    if not domain or not domain.strip():
        return _page(200)
    try:
        name = _domain(domain.strip())
    except Invalid as exc:
        return _page(422, error=exc.detail, value=domain[:253])
    return Redirect(f"/scan/{quote(name, safe='')}", status_code=303)


@get("/scan/{domain:str}", opt=opt(PUBLIC), include_in_schema=False)
async def scan_page(domain: FromPath[str], request: Request[Any, Any, Any], state: State) -> Template:
    """The scan of ``domain``, fresh or cached; the URL is the one to share."""
    try:
        report, cached = await scan(ctx_of(state), request, domain[:1024])
    except DomainError as exc:
        status = {"invalid": 422, "rate_limited": 429, "unavailable": 503}.get(exc.kind, 400)
        page = _page(status, error=exc.detail, value=domain[:253] if exc.kind != "invalid" else "",
                     retry=exc.code == "scan_in_progress")
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            page.headers["Retry-After"] = str(retry_after)
        return page
    return _page(200, report=report, cached=cached, value=report.domain)


@get("/api/v1/scan", opt=opt(PUBLIC), security=[], tags=["scanner"], responses=PUBLIC_PROBLEMS,
     summary="Scan a domain as an agent would (public)",
     description="No API key. Checks the domain's poppy.json, its issuer's metadata and JWKS, the advertised "
                 "sign-in endpoints and the listed APIs; answers a score and the findings, each with its fix. "
                 "Results are cached for a few minutes; fresh scans are rate-limited per client network.")
async def scan_api(request: Request[Any, Any, Any], state: State,
                   domain: str = Parameter(max_length=1024)) -> Response[ScanReport]:
    report, cached = await scan(ctx_of(state), request, domain)
    return Response(report, headers={"X-Scan-Cache": "hit" if cached else "miss",
                                     "Cache-Control": "public, max-age=60"})


routes = [scan_form, scan_page, scan_api]
