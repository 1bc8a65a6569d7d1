"""Prometheus metrics: ``/metrics`` is served on the internal listener only, series are
labelled by route template and bounded codes, and no token, ID or slug becomes a label."""

from __future__ import annotations

import socket
from typing import Any

import httpx
from frontdoor_core.metrics import metrics_listener
from prometheus_client import generate_latest
from prometheus_client.registry import REGISTRY

from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed
from tests.support.agent import TestAgent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_public_app_has_no_metrics_endpoint(shop: Shop) -> None:
    r = await shop.ledger.get("/metrics")
    assert r.status_code == 404


async def test_the_internal_listener_serves_metrics_and_runs_its_samplers() -> None:
    port = _free_port()
    sampled: list[int] = []

    async def sampler() -> None:
        sampled.append(1)

    async with metrics_listener(port, samplers=[sampler], interval=0.05, host="127.0.0.1") as bound:
        assert bound == port
        async with httpx.AsyncClient() as client:
            r = await client.get(f"http://127.0.0.1:{port}/metrics")
    assert r.status_code == 200
    assert "frontdoor_token_grants_total" in r.text
    assert sampled
    with httpx.Client() as client:  # closed with the app
        try:
            client.get(f"http://127.0.0.1:{port}/metrics", timeout=0.5)
            raise AssertionError("the listener outlived its lifespan")
        except httpx.TransportError:
            pass


async def test_off_by_default() -> None:
    async with metrics_listener(0) as bound:
        assert bound is None


async def test_a_confirm_is_counted_by_route_template_without_ids(shop: Shop, agent: TestAgent) -> None:
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200, r.text
    text = generate_latest(REGISTRY).decode()
    assert 'path="/{slug}/operations/{operation_id}/confirm"' in text
    assert 'frontdoor_confirms_total{outcome="won"}' in text
    assert 'frontdoor_webhook_deliveries_total{error_class="none",purpose="perform",state="delivered"}' in text
    leaked: dict[str, Any] = {"operation id": op["operation_id"], "slug": shop.tenant.slug,
                              "access token": tokens["access_token"], "credential": shop.company.credential}
    assert [name for name, value in leaked.items() if value in text] == []
