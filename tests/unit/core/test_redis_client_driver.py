"""The Redis client names itself once: a new connection reads no package metadata.

redis-py's default looks its own version up in the installed package's metadata for every
connection it makes (~0.3 ms each), paid again each time a pool grows under a burst.
"""

from __future__ import annotations

from importlib import metadata

import pytest
import redis
from frontdoor_core.redis_client import create_redis


def _no_metadata(name: str) -> str:
    raise AssertionError(f"package metadata read for {name!r}")


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6390/0", "unix:///tmp/frontdoor-test-redis.sock"])
async def test_a_new_connection_reads_no_package_metadata(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    client = create_redis(url)
    try:
        monkeypatch.setattr(metadata, "version", _no_metadata)
        connection = client.connection_pool.make_connection()  # not connected: nothing is sent
        assert connection.driver_info is not None
        assert connection.driver_info.name == "redis-py"
        assert connection.driver_info.lib_version == redis.__version__
    finally:
        await client.aclose()
