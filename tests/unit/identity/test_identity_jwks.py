"""parse_jwks: only public asymmetric signing keys from the verified jwks_uri (GUIDE-jwt-03)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import personal_agent_protocol
import pytest
from frontdoor_identity import MAX_KEYS, InvalidClientMetadata, ResolutionReason, parse_jwks
from joserfc.jwk import ECKey, OctKey, OKPKey, RSAKey

FIXTURES = Path(personal_agent_protocol.__file__).parent / "protocol" / "fixtures"
VALID: dict[str, Any] = json.loads((FIXTURES / "jwks-valid.json").read_text())
EC: dict[str, Any] = VALID["keys"][0]
R = ResolutionReason


def refused(doc: object) -> ResolutionReason | object:
    with pytest.raises(InvalidClientMetadata) as caught:
        parse_jwks(doc)
    assert caught.value.stage == "jwks"
    return caught.value.reason


def test_the_protocol_fixture_gives_its_key_by_kid() -> None:
    keys = parse_jwks(VALID)
    (key,) = keys.keys
    assert key.kid == "agent-signing-2026-10"
    assert keys.get_by_kid("agent-signing-2026-10") is key
    assert not key.is_private


def test_rsa_2048_and_ed25519_public_keys_are_kept() -> None:
    rsa = RSAKey.generate_key(2048).as_dict(private=False) | {"kid": "r"}
    okp = OKPKey.generate_key("Ed25519").as_dict(private=False) | {"kid": "o"}
    assert sorted(k.kid or "" for k in parse_jwks({"keys": [rsa, okp, EC]}).keys) == ["agent-signing-2026-10", "o", "r"]


@pytest.mark.parametrize(
    "entry",
    [
        ECKey.generate_key("P-256").as_dict(private=True),
        RSAKey.generate_key(2048).as_dict(private=True),
        {**EC, "d": "AAAA"},
        OctKey.generate_key(256).as_dict(private=True),
        {"kty": "oct"},
    ],
)
def test_any_private_or_symmetric_material_refuses_the_whole_set(entry: dict[str, Any]) -> None:
    assert refused({"keys": [EC, entry]}) is R.PRIVATE_KEY_PUBLISHED


@pytest.mark.parametrize(
    "entry",
    [
        {**EC, "use": "enc"},
        {**EC, "alg": "HS256"},
        {**EC, "alg": "none"},
        {**EC, "key_ops": ["encrypt"]},
        {**EC, "crv": "secp256k1"},
        {**EC, "y": "AAAAjf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA"},  # not on the curve
        {**EC, "x": 5},
        {"kty": "XYZ", "kid": "future"},
        OKPKey.generate_key("X25519").as_dict(private=False),
        RSAKey.generate_key(1024).as_dict(private=False),
        "not a key",
    ],
)
def test_unusable_entries_are_skipped_and_a_set_of_only_those_is_refused(entry: object) -> None:
    assert [k.kid for k in parse_jwks({"keys": [entry, EC]}).keys] == ["agent-signing-2026-10"]
    assert refused({"keys": [entry]}) is R.NO_USABLE_KEYS


@pytest.mark.parametrize("doc", [{"keys": []}])
def test_an_empty_set_is_refused(doc: object) -> None:
    assert refused(doc) is R.NO_USABLE_KEYS


@pytest.mark.parametrize("doc", [{"keys": EC}, {}, {"keys": [EC] * (MAX_KEYS + 1)}])
def test_keys_must_be_a_bounded_array(doc: object) -> None:
    assert refused(doc) is R.INVALID_FIELD


@pytest.mark.parametrize("doc", [[EC], "keys", None])
def test_the_set_must_be_an_object(doc: object) -> None:
    assert refused(doc) is R.NOT_OBJECT
