"""Admin password hashing and strength rules."""

from __future__ import annotations

import argon2
import pytest
from frontdoor_tenancy.credentials import (
    DUMMY_PASSWORD_HASH,
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    check_password_strength,
    hash_password,
    needs_rehash,
    verify_password,
)

GOOD = "vivid-otter-cobalt-79"
EMAIL = "jane.doe@acme.example"
ORG = "Initech Systems"


@pytest.fixture(scope="module")
def good_hash() -> str:
    return hash_password(GOOD)


def strength(password: str, *, email: str = EMAIL, org_name: str = ORG) -> list[str]:
    return check_password_strength(password, email=email, org_name=org_name)


def test_hash_is_argon2id_with_the_documented_parameters(good_hash: str) -> None:
    assert good_hash.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    params = argon2.extract_parameters(good_hash)
    assert (params.salt_len, params.hash_len) == (16, 32)
    assert GOOD not in good_hash


def test_hashes_are_salted() -> None:
    assert hash_password(GOOD) != hash_password(GOOD)


def test_verify_accepts_the_password_and_nothing_else(good_hash: str) -> None:
    assert verify_password(good_hash, GOOD) is True
    assert verify_password(good_hash, GOOD + " ") is False
    assert verify_password(good_hash, GOOD.upper()) is False
    assert verify_password(good_hash, "") is False


@pytest.mark.parametrize("stored", ["", "plain text", "$argon2id$v=19$m=65536,t=3,p=4$garbage", "$2b$12$abc"])
def test_verify_never_raises_on_a_bad_stored_hash(stored: str) -> None:
    assert verify_password(stored, GOOD) is False


def test_unicode_forms_verify_alike() -> None:
    composed = "caf\u00e9-crème-brûlée-42"
    decomposed = "cafe\u0301-cre\u0300me-bru\u0302le\u0301e-42"
    assert composed != decomposed
    assert verify_password(hash_password(composed), decomposed) is True


def test_dummy_hash_costs_the_same_and_matches_nothing(good_hash: str) -> None:
    assert argon2.extract_parameters(DUMMY_PASSWORD_HASH) == argon2.extract_parameters(good_hash)
    assert not needs_rehash(DUMMY_PASSWORD_HASH)
    for candidate in ["", GOOD, "password", "dummy"]:
        assert verify_password(DUMMY_PASSWORD_HASH, candidate) is False


def test_needs_rehash(good_hash: str) -> None:
    assert needs_rehash(good_hash) is False
    weaker = argon2.PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash(GOOD)
    assert needs_rehash(weaker) is True
    assert verify_password(weaker, GOOD) is True  # still verifies, so it can be upgraded
    assert needs_rehash("not a hash") is True


def test_a_good_password_passes() -> None:
    assert strength(GOOD) == []
    assert strength("x" * (MIN_PASSWORD_LENGTH - 1) + "y") == []
    assert strength(("Tr0ub4dor&3-" * 30)[:MAX_PASSWORD_LENGTH]) == []


@pytest.mark.parametrize(
    ("password", "codes"),
    [
        ("Sh0rt!pass", ["too_short"]),
        ("", ["too_short"]),
        ("q9!Zr" * 52, ["too_long"]),
        ("a" * 12, ["single_character"]),
        ("7" * 12, ["single_character", "only_digits"]),
        ("839201746352", ["only_digits"]),
        ("\uff18\uff13\uff19\uff12\uff10\uff11\uff17\uff14\uff16\uff13\uff15\uff12", ["only_digits"]),
        ("12345", ["too_short", "only_digits", "common_password"]),
        ("janedoe-rocks-2024", ["contains_email"]),
        ("Jane.Doe.Is.Great!", ["contains_email"]),
        ("Initech-forever-99", ["contains_organization_name"]),
        ("initechsystems!!", ["contains_organization_name"]),
        ("go-systems-go-2024", ["contains_organization_name"]),
        ("Password1234", ["common_password"]),
        ("p@ssw0rd!!2024", ["common_password"]),
        ("QWERTYUIOP123", ["common_password"]),
        ("!!iloveyou!!2025", ["common_password"]),
        ("correcthorsebatterystaple", ["common_password"]),
        ("$uper$ecret99", ["common_password"]),
    ],
)
def test_refusal_codes(password: str, codes: list[str]) -> None:
    assert strength(password) == codes


def test_length_bounds_are_inclusive() -> None:
    assert "too_short" in strength("Zq8#mWv2!kLp"[: MIN_PASSWORD_LENGTH - 1])
    assert "too_short" not in strength("Zq8#mWv2!kLp"[:MIN_PASSWORD_LENGTH])
    long_ok = ("Zq8#mWv2!kLp" * 30)[:MAX_PASSWORD_LENGTH]
    assert "too_long" not in strength(long_ok)
    assert "too_long" in strength(long_ok + "x")


def test_email_plus_tag_and_short_local_parts() -> None:
    assert strength("janedoe-rocks-2024", email="jane.doe+admin@acme.example") == ["contains_email"]
    # A two-letter local part would refuse far too much; it is not checked.
    assert strength("vivid-jo-otter-79", email="jo@acme.example") == []


def test_short_organization_words_are_not_refused() -> None:
    assert strength("vivid-otter-inc-79", org_name="Ot Inc") == []
    assert strength("vivid-otter-inc-79", org_name="Otter Inc") == ["contains_organization_name"]
