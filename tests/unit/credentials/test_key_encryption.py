"""Envelope encryption under FRONTDOOR_KEK."""

from __future__ import annotations

import base64
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from frontdoor_tenancy.credentials import (
    DecryptionError,
    InvalidKekValue,
    Kek,
    generate_kek_value,
    kek_id,
    row_aad,
)

AAD_A = row_aad("signing_key", "ten_A", "kid-1")
AAD_B = row_aad("signing_key", "ten_B", "kid-1")


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture
def raw_key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def kek(raw_key: bytes) -> Kek:
    return Kek.from_env_value(b64url(raw_key))


def test_round_trip(kek: Kek) -> None:
    blob = kek.encrypt(b"private key bytes", aad=AAD_A)
    assert kek.decrypt(blob, aad=AAD_A) == b"private key bytes"
    assert b"private key bytes" not in blob


def test_empty_plaintext_round_trips(kek: Kek) -> None:
    assert kek.decrypt(kek.encrypt(b"", aad=AAD_A), aad=AAD_A) == b""


def test_blob_layout_matches_the_documented_format(kek: Kek, raw_key: bytes) -> None:
    plaintext = b"secret"
    blob = kek.encrypt(plaintext, aad=AAD_A)
    assert blob[0] == 1
    assert blob[1:9] == kek_id(raw_key)
    assert len(blob) == 1 + 8 + 12 + len(plaintext) + 16
    # Independent decryption with the raw primitive: header and caller aad are both
    # authenticated, in that order.
    header, nonce, sealed = blob[:9], blob[9:21], blob[21:]
    assert AESGCM(raw_key).decrypt(nonce, sealed, header + AAD_A) == plaintext


def test_each_encryption_uses_a_fresh_nonce(kek: Kek) -> None:
    blobs = {kek.encrypt(b"same", aad=AAD_A) for _ in range(50)}
    assert len(blobs) == 50
    assert len({blob[9:21] for blob in blobs}) == 50


def test_wrong_aad_fails(kek: Kek) -> None:
    blob = kek.encrypt(b"secret", aad=AAD_A)
    with pytest.raises(DecryptionError) as caught:
        kek.decrypt(blob, aad=AAD_B)
    assert caught.value.reason == "authentication_failed"


def test_blob_cannot_move_to_another_kind_of_row(kek: Kek) -> None:
    blob = kek.encrypt(b"secret", aad=row_aad("signing_key", "ten_A", "x"))
    with pytest.raises(DecryptionError):
        kek.decrypt(blob, aad=row_aad("webhook_secret", "ten_A", "x"))


def test_row_aad_is_unambiguous() -> None:
    assert row_aad("p", "a", "bc") != row_aad("p", "ab", "c")
    assert row_aad("p", "ab") != row_aad("pa", "b")
    assert row_aad("p", "a", "") != row_aad("p", "a")
    assert row_aad("signing_key", "ten_A", "k") == row_aad("signing_key", "ten_A", "k")


def test_every_tampered_byte_is_detected(kek: Kek) -> None:
    blob = kek.encrypt(b"some secret material", aad=AAD_A)
    for position in range(len(blob)):
        tampered = bytearray(blob)
        tampered[position] ^= 0x01
        with pytest.raises(DecryptionError) as caught:
            kek.decrypt(bytes(tampered), aad=AAD_A)
        expected = {0: "unsupported_version"}.get(position)
        if expected is None:
            expected = "unknown_kek" if position < 9 else "authentication_failed"
        assert caught.value.reason == expected, position


@pytest.mark.parametrize("length", [0, 1, 9, 36])
def test_truncated_blob_is_malformed(kek: Kek, length: int) -> None:
    blob = kek.encrypt(b"secret", aad=AAD_A)
    with pytest.raises(DecryptionError) as caught:
        kek.decrypt(blob[:length], aad=AAD_A)
    assert caught.value.reason == "malformed"


def test_truncated_ciphertext_fails_authentication(kek: Kek) -> None:
    blob = kek.encrypt(b"secret", aad=AAD_A)
    with pytest.raises(DecryptionError) as caught:
        kek.decrypt(blob[:-1], aad=AAD_A)
    assert caught.value.reason == "authentication_failed"


def test_rotation_decrypts_old_blobs_and_encrypts_under_the_new_key() -> None:
    old_value, new_value = generate_kek_value(), generate_kek_value()
    old = Kek.from_env_value(old_value)
    old_blob = old.encrypt(b"secret", aad=AAD_A)

    rotated = Kek.from_env_value(f"{new_value},{old_value}")
    assert rotated.decrypt(old_blob, aad=AAD_A) == b"secret"
    assert not rotated.is_current(old_blob)

    new_blob = rotated.encrypt(rotated.decrypt(old_blob, aad=AAD_A), aad=AAD_A)
    assert rotated.is_current(new_blob)
    assert rotated.current_id == Kek.from_env_value(new_value).current_id
    assert rotated.ids == [rotated.current_id, old.current_id]

    with pytest.raises(DecryptionError) as caught:
        old.decrypt(new_blob, aad=AAD_A)
    assert caught.value.reason == "unknown_kek"

    new_only = Kek.from_env_value(new_value)
    assert new_only.decrypt(new_blob, aad=AAD_A) == b"secret"
    with pytest.raises(DecryptionError) as caught:
        new_only.decrypt(old_blob, aad=AAD_A)
    assert caught.value.reason == "unknown_kek"


def test_generated_value_is_32_bytes_of_base64url() -> None:
    value = generate_kek_value()
    assert len(value) == 43
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert len(base64.urlsafe_b64decode(value + "=")) == 32
    assert generate_kek_value() != value


def test_whitespace_around_entries_is_ignored() -> None:
    first, second = generate_kek_value(), generate_kek_value()
    spaced = Kek.from_env_value(f"  {first} ,\n{second}\n")
    assert spaced.ids == Kek.from_env_value(f"{first},{second}").ids


def test_kek_id_depends_only_on_the_key(raw_key: bytes) -> None:
    assert kek_id(raw_key) == kek_id(bytes(raw_key))
    assert kek_id(raw_key) != kek_id(os.urandom(32))
    assert len(kek_id(raw_key)) == 8


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        ",",
        "{k},",
        "{k},,{k2}",
        "{k}=",
        b64url(b"\x00" * 16),
        b64url(b"\x00" * 33),
        base64.b64encode(b"\xfb\xff" * 16).decode(),
        "{k}:{k2}",
        "id1:{k}",
        "{k},{k}",
        "a",
    ],
)
def test_malformed_values_are_refused(value: str) -> None:
    key, key2 = generate_kek_value(), generate_kek_value()
    with pytest.raises(InvalidKekValue) as caught:
        Kek.from_env_value(value.format(k=key, k2=key2))
    assert key not in str(caught.value)


def test_repr_never_shows_key_material(kek: Kek, raw_key: bytes) -> None:
    text = repr(kek)
    assert b64url(raw_key) not in text
    assert raw_key.hex() not in text
    assert kek.current_id in text


def test_decryption_error_does_not_reveal_plaintext(kek: Kek) -> None:
    blob = kek.encrypt(b"hunter2-secret", aad=AAD_A)
    with pytest.raises(DecryptionError) as caught:
        kek.decrypt(blob, aad=AAD_B)
    assert "hunter2" not in str(caught.value)


def test_reencrypt_moves_a_blob_to_the_current_key_with_its_aad() -> None:
    old, new = generate_kek_value(), generate_kek_value()
    blob = Kek.from_env_value(old).encrypt(b"secret", aad=AAD_A)
    rotated = Kek.from_env_value(f"{new},{old}")
    moved = rotated.reencrypt(blob, aad=AAD_A)
    assert moved != blob and rotated.is_current(moved) and moved[1:9] == rotated.current_id_bytes
    assert Kek.from_env_value(new).decrypt(moved, aad=AAD_A) == b"secret"
    with pytest.raises(DecryptionError):
        Kek.from_env_value(new).decrypt(moved, aad=AAD_B)
    assert rotated.reencrypt(moved, aad=AAD_A) is moved  # already current: untouched
    with pytest.raises(DecryptionError) as wrong_aad:
        rotated.reencrypt(blob, aad=AAD_B)
    assert wrong_aad.value.reason == "authentication_failed"
    with pytest.raises(DecryptionError) as unknown:
        Kek.from_env_value(new).reencrypt(blob, aad=AAD_A)
    assert unknown.value.reason == "unknown_kek"
