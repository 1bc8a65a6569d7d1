"""Redis key hash tags, so that every key works on a Redis Cluster.

A Redis Cluster stores a key in one of 16,384 slots, chosen by the CRC16 of the key, or of
the part between the first ``{`` and the next ``}`` when there is one (the *hash tag*). A
command, a ``MULTI``/``EXEC`` block or a Lua script may only touch keys of one slot. Every
Frontdoor key therefore carries its natural shard in a hash tag: the tenant for everything
tenant-owned (``tok:agent:{ten_...}:<client_id>``, ``jti:{ten_...}:dpop:<digest>``), the
flow, the domain or the client network for the few keys that belong to no tenant. The keys
one command touches together (the token endpoint's replay claims and its Session count, a
device code and its user code, a login request and its response) share the tag, so they share
a slot. docs/scaling.md lists the commands and why each is safe on a cluster.
"""

from __future__ import annotations

import binascii

__all__ = ["SLOTS", "key_slot", "shard"]

SLOTS = 16384
"""Hash slots of a Redis Cluster."""


def shard(value: str) -> str:
    """``value`` as a hash tag: ``{value}`` (braces inside it are dropped, so the tag is whole)."""
    return "{" + value.replace("{", "").replace("}", "") + "}"


def key_slot(key: str | bytes) -> int:
    """The Redis Cluster slot of ``key`` (CRC16/XMODEM of its hash tag, else of the whole key)."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1:end]
    return binascii.crc_hqx(raw, 0) % SLOTS
