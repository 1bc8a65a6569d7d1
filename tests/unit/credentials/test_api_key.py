"""Management API keys: format, parsing, hashing."""

from __future__ import annotations

import hashlib
import math
import re
import string
import zlib
from collections.abc import Callable

import pytest
from frontdoor_tenancy.credentials import (
    API_KEY_PATTERN,
    api_key_hashes_equal,
    hash_api_key,
    new_api_key,
    parse_api_key,
    verify_api_key,
)

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


def independent_checksum(body: str) -> str:
    value = zlib.crc32(body.encode())
    out = ""
    for _ in range(6):
        out = BASE62[value % 62] + out
        value //= 62
    return out


def test_issued_key_format() -> None:
    issued = new_api_key()
    key = issued.plaintext
    assert re.fullmatch(r"fdk_[0-9A-Za-z]{8}_[0-9A-Za-z]{49}", key)
    assert len(key) == 62
    assert key[4:12] == issued.prefix
    assert key[-6:] == independent_checksum(key[:-6])
    assert issued.hash == hashlib.sha256(key.encode()).digest()


def test_secret_has_at_least_192_bits() -> None:
    # 43 base62 characters: log2(62) * 43 > 256, minus a 32-bit checksum.
    assert 43 * math.log2(62) - 32 >= 192
    keys = {new_api_key().plaintext[13:56] for _ in range(200)}
    assert len(keys) == 200
    assert set("".join(keys)) == set(BASE62)  # the whole alphabet is used


def test_prefixes_differ() -> None:
    assert len({new_api_key().prefix for _ in range(200)}) == 200


def test_parse_round_trip() -> None:
    issued = new_api_key()
    parsed = parse_api_key(issued.plaintext)
    assert parsed is not None
    assert parsed.prefix == issued.prefix
    assert parsed.hash == issued.hash == hash_api_key(issued.plaintext)


def test_every_single_character_change_is_rejected() -> None:
    key = new_api_key().plaintext
    for position in range(len(key)):
        replacement = "A" if key[position] != "A" else "B"
        mutated = key[:position] + replacement + key[position + 1 :]
        assert parse_api_key(mutated) is None, position


@pytest.mark.parametrize(
    "mutate",
    [
        lambda k: "",
        lambda k: k[:-1],
        lambda k: k + "0",
        lambda k: " " + k,
        lambda k: k + "\n",
        lambda k: "Bearer " + k,
        lambda k: k.upper(),
        lambda k: "FDK_" + k[4:],
        lambda k: "fdx_" + k[4:],
        lambda k: k.replace("_", "-"),
        lambda k: k[:20] + "é" + k[21:],
        lambda k: k[:20] + "+" + k[21:],
        lambda k: k[:12] + k[13:] + "0",
        lambda k: "fd_live_" + k[4:],
    ],
)
def test_malformed_keys_are_rejected(mutate: Callable[[str], str]) -> None:
    key = new_api_key().plaintext
    assert parse_api_key(mutate(key)) is None


def test_a_well_formed_key_with_a_valid_checksum_parses_even_if_unknown() -> None:
    body = "fdk_ABCDEFGH_" + "x" * 43
    key = body + independent_checksum(body)
    parsed = parse_api_key(key)
    assert parsed is not None
    assert parsed.prefix == "ABCDEFGH"
    wrong = independent_checksum(body + "x")
    assert wrong != independent_checksum(body)
    assert parse_api_key(body + wrong) is None


def test_verify_api_key() -> None:
    issued, other = new_api_key(), new_api_key()
    assert verify_api_key(issued.plaintext, issued.hash) is True
    assert verify_api_key(issued.plaintext, other.hash) is False
    assert verify_api_key(issued.plaintext[:-1], hash_api_key(issued.plaintext[:-1])) is False


def test_hashes_equal() -> None:
    a = hash_api_key("fdk_a")
    assert api_key_hashes_equal(a, hash_api_key("fdk_a")) is True
    assert api_key_hashes_equal(a, hash_api_key("fdk_b")) is False
    assert api_key_hashes_equal(a, a[:-1]) is False


def test_scanner_pattern_finds_keys_in_text() -> None:
    key = new_api_key().plaintext
    text = f'export TOKEN="{key}"\nother fdk_short_thing'
    found = [m.group(0) for m in re.finditer(rf"\b{API_KEY_PATTERN.pattern}\b", text)]
    assert found == [key]


def test_repr_never_shows_the_secret() -> None:
    issued = new_api_key()
    parsed = parse_api_key(issued.plaintext)
    assert issued.plaintext not in repr(issued)
    assert issued.plaintext[13:] not in repr(parsed)
    assert issued.prefix in repr(issued)
