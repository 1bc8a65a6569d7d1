"""The Redis client: hot, disposable state only (replay caches, rate limits, codes).

A single Redis (``redis.asyncio.Redis``) by default; with ``FRONTDOOR_REDIS_CLUSTER=1`` a
``redis.asyncio.RedisCluster`` seeded by ``REDIS_URL`` (docs/scaling.md, "Redis Cluster").
Both answer the commands the services send the same way: every multi-key command, ``MULTI``
block and script keeps its keys in one slot (``redis_keys.shard`` hash tags), pipelines
without a transaction are split by node by the cluster client, and pub/sub goes through any
node (a cluster broadcasts ``PUBLISH``). What differs and what the callers do about it:
``PUBLISH`` cannot be queued in a cluster pipeline (it has no key), so it is sent after the
pipeline; a cluster client has no single ``connection_pool`` (`drop_connections`).
"""

from __future__ import annotations

from typing import Any, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.driver_info import DriverInfo
from redis.exceptions import RedisError

from .metrics import REDIS_ERRORS

__all__ = ["Redis", "create_redis", "drop_connections", "is_cluster"]

Redis = aioredis.Redis

# The client's name and version for CLIENT SETINFO, given once: by default redis-py reads its own
# version from the installed package's metadata for every new connection (~0.3 ms each, so ~20 ms
# when a pool grows by 64 under a first burst).
_DRIVER = DriverInfo(lib_version=redis.__version__)
_TIMEOUTS: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0, "health_check_interval": 15,
                             "driver_info": _DRIVER}



def _count_error(args: tuple[Any, ...]) -> None:
    name = args[0] if args else "unknown"
    REDIS_ERRORS.labels(str(name.decode() if isinstance(name, bytes) else name).split(" ", 1)[0].upper()).inc()


class _CountingRedis(aioredis.Redis):
    """Counts failed commands in ``frontdoor_redis_errors_total`` by command name (not its keys)."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except RedisError:
            _count_error(args)
            raise


class _CountingRedisCluster(RedisCluster):
    """The same count for a cluster client (a MOVED followed by the client is not an error)."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().execute_command(*args, **options)
        except RedisError:
            _count_error(args)
            raise


def create_redis(url: str, *, cluster: bool = False) -> aioredis.Redis:
    """A client for ``url`` with short timeouts: callers fail closed rather than hang.

    ``cluster``: ``url`` is one node of a Redis Cluster; the client learns the others and the
    slot map from it (and again on ``MOVED``). Typed as ``Redis``: it serves every command the
    services use (``tests/integration/test_redis_cluster.py`` runs them on a real cluster).
    """
    if cluster:
        return cast(aioredis.Redis, _CountingRedisCluster.from_url(url, **_TIMEOUTS))
    client: aioredis.Redis = _CountingRedis.from_url(url, retry_on_timeout=False, **_TIMEOUTS)
    return client


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a cluster client (a ``RedisCluster``, whatever its ``Redis`` type says)."""
    return isinstance(client, RedisCluster)


async def drop_connections(client: aioredis.Redis) -> None:
    """Drop every connection at once, in use or not (a shutdown past its grace period)."""
    if isinstance(client, RedisCluster):
        for node in client.get_nodes():
            await node.disconnect()
        return
    await client.connection_pool.disconnect(inuse_connections=True)
