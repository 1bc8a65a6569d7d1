"""The agent funnel (``/analytics/funnel``): per agent and period, Sessions → sign-ins
prompted → completed (and where the others were abandoned: before the login page, at it, at
consent, at a step-up's consent) → operations proposed → approved → performed, with the terms_changed and
re-approval rates, failed and unknown outcomes; charts of the last 30 UTC days, a table, a
CSV export.

Read from the rollup `frontdoor_operations.funnel` keeps (closed days) plus the days after
its mark, live; any role may read it.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any, Final

from frontdoor_operations import funnel
from litestar import Response, Router, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import Parameter
from litestar.response import Template

from . import charts
from .deps import ctx_of
from .page import EXCEPTION_HANDLERS, Console, provide_console

__all__ = ["PERIODS", "router"]

PERIODS: Final = (7, 30, 90)
_CSV_COLUMNS: Final = ("client_id", *funnel.METRICS, "unknown", "terms_changed_rate", "reapproval_rate")


def _period(days: int) -> int:
    # PERIODS are the links offered; any 1..366 days (the parameter's bounds) may be asked for.
    return min(max(days, 1), 366)


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


@get("/analytics/funnel")
async def funnel_page(console: Console, state: State, days: int = Parameter(default=30, ge=1, le=366)) -> Template:
    ctx = ctx_of(state)
    now = ctx.now()
    period = _period(days)
    chart_days, chart_since = charts.chart_days(now)
    async with ctx.pool.acquire() as conn:
        view = await funnel.read_funnel(conn, console.tenant.id, since=now.date() - timedelta(days=period - 1), now=now)
        month = view if period == charts.DAYS else await funnel.read_funnel(
            conn, console.tenant.id, since=chart_since.date(), now=now)

    def series(metric: str) -> dict[Any, int]:
        return {d: c[metric] for d, c in month.by_day.items()}

    trend = [
        charts.bar_chart("funnel-sessions", "Sessions and sign-ins", "Sessions started", chart_days, [
            ("sessions", "Sessions started", series("sessions")), ("succeeded", "sign-ins completed", series("sign_ins"))]),
        charts.bar_chart("funnel-operations", "Operations proposed and approved", "operations", chart_days, [
            ("other", "proposed", series("proposed")), ("succeeded", "approved", series("approved"))]),
        charts.bar_chart("funnel-abandoned", "Sign-ins abandoned", "sign-ins abandoned", chart_days, [
            ("other", "before the login page", series("abandoned_before_login")),
            ("sessions", "at the login page", series("abandoned_login")),
            ("failed", "at consent", series("abandoned_consent")),
            ("step-up", "at a step-up", series("abandoned_step_up"))]),
        charts.bar_chart("funnel-outcomes", "Outcomes", "outcomes", chart_days, [
            ("succeeded", "performed", series("performed")), ("failed", "failed", series("failed"))]),
    ]
    return console.page("funnel.html", nav="funnel", view=view, period=period, periods=PERIODS, charts=trend,
                        rate=_rate)


@get("/analytics/funnel.csv")
async def funnel_csv(console: Console, state: State, days: int = Parameter(default=30, ge=1, le=366)) -> Response[str]:
    ctx = ctx_of(state)
    now = ctx.now()
    period = _period(days)
    async with ctx.pool.acquire() as conn:
        view = await funnel.read_funnel(conn, console.tenant.id, since=now.date() - timedelta(days=period - 1), now=now)
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(_CSV_COLUMNS)
    for a in view.agents:
        # a client_id is a URL the agent chose: never let a spreadsheet read it as a formula
        client = "'" + a.client_id if a.client_id[:1] in ("=", "+", "-", "@", "\t", "\r") else a.client_id
        w.writerow([client, *(getattr(a, m) for m in funnel.METRICS), a.unknown,
                    _rate(a.rate("revised", "proposed")), _rate(a.rate("reapproved", "revised"))])
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="agent-funnel-{console.tenant.slug}-{period}d.csv"'})


router = Router(path="/", route_handlers=[funnel_page, funnel_csv], dependencies={"console": Provide(provide_console)},
                exception_handlers=EXCEPTION_HANDLERS, include_in_schema=False)
