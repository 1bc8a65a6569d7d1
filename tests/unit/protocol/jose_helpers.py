"""Keys and hand-made JWS values for the JOSE verification tests.

Signing is done here, not with the code under test, so a forged or odd header (``alg:
none``, an embedded ``jwk``, duplicate members) can be built exactly as an attacker would.
Keys are generated with joserfc.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

from joserfc.jwk import ECKey, JWKRegistry, Key, KeySet, OKPKey, RSAKey
from joserfc.jws import JWSRegistry

NOW = 1_780_000_000
"""The injected clock of every test."""
ISSUER = "https://auth.frontdoor.example/shop-a"
TOKEN_ENDPOINT = "https://auth.frontdoor.example/shop-a/oauth/token"
CLIENT_ID = "https://agent.example/.well-known/client.json"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
    return b64(raw)


def jti() -> str:
    return b64(secrets.token_bytes(16))


def ec_key(kid: str | None = "key-1", crv: str = "P-256", **params: str) -> ECKey:
    parameters: dict[str, str] = {"kid": kid, **params} if kid else dict(params)
    return ECKey.generate_key(crv, parameters=parameters)  # type: ignore[arg-type]


def rsa_key(kid: str = "rsa-1", bits: int = 2048) -> RSAKey:
    return RSAKey.generate_key(bits, parameters={"kid": kid})


def okp_key(kid: str = "ed-1") -> OKPKey:
    return OKPKey.generate_key("Ed25519", parameters={"kid": kid})


def public(key: Key) -> Key:
    return JWKRegistry.import_key(key.as_dict(private=False))


def public_set(*keys: Key) -> KeySet:
    return KeySet([public(key) for key in keys])


def sign(header: dict[str, Any], claims: dict[str, Any] | bytes, key: Key, *, alg: str | None = None) -> str:
    """A compact JWS of exactly ``header`` and ``claims``, signed with ``alg`` (default: header's)."""
    signing_input = f"{segment(header)}.{segment(claims)}"
    model = JWSRegistry.algorithms[alg or header["alg"]]
    return f"{signing_input}.{b64(model.sign(signing_input.encode(), key))}"


def unsigned(header: dict[str, Any], claims: dict[str, Any]) -> str:
    """``alg: none``: an empty signature."""
    return f"{segment({**header, 'alg': 'none'})}.{segment(claims)}."


def hs256_with_public_key(header: dict[str, Any], claims: dict[str, Any], key: Key) -> str:
    """Algorithm confusion: HMAC keyed with the public JWK the verifier holds."""
    secret = json.dumps(key.as_dict(private=False), sort_keys=True).encode()
    signing_input = f"{segment({**header, 'alg': 'HS256'})}.{segment(claims)}"
    return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


def assertion_claims(*, sub: str, aud: Any = ISSUER, lifetime: int = 60, shift: int = 0) -> dict[str, Any]:
    issued = NOW + shift
    return {"iss": CLIENT_ID, "sub": sub, "aud": aud, "iat": issued, "exp": issued + lifetime, "jti": jti()}
