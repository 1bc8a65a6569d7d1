"""deploy/grafana/frontdoor.json queries only series the services export (a renamed metric fails here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from frontdoor_core import metrics
from frontdoor_dispatcher import task_metrics
from prometheus_client.registry import REGISTRY

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "frontdoor.json"
# Litestar's Prometheus middleware with prefix "frontdoor" (frontdoor_httpkit.metrics)
_REQUEST_SERIES = {"frontdoor_requests_total", "frontdoor_request_duration_seconds_bucket",
                   "frontdoor_requests_error_total", "frontdoor_requests_in_progress"}


def _exported() -> set[str]:
    names = set(_REQUEST_SERIES)
    for value in vars(metrics).values():
        describe = getattr(value, "describe", None)
        if callable(describe) and hasattr(value, "_name"):
            for family in describe():
                names.update(s for s in (family.name, family.name + "_total"))
    # The Celery worker's, made when it connects its signals (every sample name, _bucket included).
    task_metrics.connect(0)
    names.update(n for n in REGISTRY._names_to_collectors if n.startswith("frontdoor_celery_"))
    return names


def test_every_panel_queries_an_exported_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = _exported()
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bfrontdoor_[a-z_]+", target["expr"])}
    assert queried, "the dashboard queries nothing"
    assert queried <= exported, sorted(queried - exported)
