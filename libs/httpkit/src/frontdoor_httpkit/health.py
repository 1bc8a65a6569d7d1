"""``/healthz`` (the process serves) and ``/readyz`` (its database and Redis answer)."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Response, get
from litestar.datastructures import State

__all__ = ["health_routes"]


def health_routes(service: str) -> list[Any]:
    """Probe handlers for ``service`` (they read ``state.pool`` and ``state.redis``)."""

    @get("/healthz", include_in_schema=False, cache=False, sync_to_thread=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @get("/readyz", include_in_schema=False, cache=False)
    async def readyz(state: State) -> Response[dict[str, Any]]:
        checks: dict[str, str] = {}

        async def db() -> None:
            async with state.pool.acquire(timeout=2) as conn:
                await conn.fetchval("SELECT 1")

        async def redis() -> None:
            await state.redis.ping()

        for name, probe in (("database", db), ("redis", redis)):
            try:
                await asyncio.wait_for(probe(), timeout=2)
                checks[name] = "ok"
            except Exception:
                checks[name] = "unavailable"
        ready = all(v == "ok" for v in checks.values())
        return Response(
            {"status": "ready" if ready else "not_ready", "service": service, "checks": checks},
            status_code=200 if ready else 503,
            headers={"Cache-Control": "no-store"},
        )

    return [healthz, readyz]
