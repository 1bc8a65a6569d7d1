"""Challenge tokens: entropy, length, alphabet, and the TXT value built from them."""

import base64
import re
from collections import Counter

import pytest
from frontdoor_tenancy.domains import challenge_value, new_challenge_token

BASE32_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"


def _decode(token: str) -> bytes:
    return base64.b32decode(token.upper())


def test_token_is_32_lowercase_base32_characters_without_padding() -> None:
    for _ in range(100):
        token = new_challenge_token()
        assert re.fullmatch(r"[a-z2-7]{32}", token), token
        assert "=" not in token


def test_token_encodes_at_least_128_random_bits() -> None:
    raw = _decode(new_challenge_token())
    assert len(raw) * 8 == 160
    assert len(raw) * 8 >= 128


def test_tokens_are_unique() -> None:
    tokens = {new_challenge_token() for _ in range(2000)}
    assert len(tokens) == 2000


def test_tokens_use_the_whole_alphabet_evenly() -> None:
    counts = Counter("".join(new_challenge_token() for _ in range(1000)))
    assert set(counts) == set(BASE32_ALPHABET)
    # 32000 characters, 1000 expected per symbol; a bias of +-20% is > 19 sigma.
    assert all(800 < count < 1200 for count in counts.values()), counts


def test_token_bits_are_balanced() -> None:
    raw = b"".join(_decode(new_challenge_token()) for _ in range(500))
    ones = sum(bin(byte).count("1") for byte in raw)
    total = len(raw) * 8
    # 80000 bits: one standard deviation is ~0.0018; 0.02 is > 10 sigma.
    assert abs(ones / total - 0.5) < 0.02


def test_challenge_value() -> None:
    token = new_challenge_token()
    assert challenge_value(token) == f"frontdoor-verify={token}"


@pytest.mark.parametrize(
    "token",
    ["", "abc", "A" * 32, "a" * 25, "a" * 31 + "1", "a" * 31 + "=", " " + "a" * 32, "a" * 32 + "\n"],
)
def test_challenge_value_refuses_malformed_tokens(token: str) -> None:
    with pytest.raises(ValueError, match="base32"):
        challenge_value(token)
