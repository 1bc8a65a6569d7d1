"""An agent's PAP 1.0 credentials built by hand, so a test can bend any single part.

The delegation and the Session JWT are signed here with :func:`jose_helpers.sign`, not
with the code under test, so a forged header (``alg: none``, an embedded ``jwk``, a
duplicate member) is built exactly as an attacker would.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from frontdoor_protocol import (
    AccessTokenClaims,
    Confirmation,
    jwk_thumbprint,
    mint_access_token,
    parse_poppy_session,
    verify_poppy_session,
)
from frontdoor_protocol.delegated_session import DelegatedSession
from joserfc.jwk import ECKey, Key, KeySet

from .jose_helpers import CLIENT_ID, ISSUER, NOW, b64, ec_key, jti, public_set, sign

URL = "https://shop.example/api/orders"
METHOD = "POST"


def ath(token: str) -> str:
    return b64(hashlib.sha256(token.encode()).digest())


def delegation_claims(delegated: Key, **changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": CLIENT_ID,
        "cnf": {"jwk": delegated.as_dict(private=False)},
        "iat": NOW - 10,
        "exp": NOW + 3600,
        "jti": jti(),
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


def session_claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": CLIENT_ID,
        "aud": ISSUER,
        "sid": "sid_7GcT2mXk9Qp4LzVb0RwYhA",
        "sub": "usr_Hq3v9Lx0Tb7Wm2Kp",
        "htm": METHOD,
        "htu": URL,
        "iat": NOW,
        "jti": jti(),
    }
    claims.update(changes)
    return {name: value for name, value in claims.items() if value is not None}


@dataclass
class Agent:
    """One agent: its identity key and a delegated key."""

    identity: Key = field(default_factory=lambda: ec_key("id-1"))
    delegated: ECKey = field(default_factory=lambda: ec_key(None))

    @property
    def keys(self) -> KeySet:
        return public_set(self.identity)

    @property
    def jkt(self) -> str:
        return jwk_thumbprint(self.delegated.as_dict(private=False))

    def delegation(self, *, header: dict[str, Any] | None = None, signer: Key | None = None, **claims: Any) -> str:
        alg = "PS384" if self.identity.key_type == "RSA" else "ES256"
        base = {"alg": alg, "typ": "poppy-delegation+jwt", "kid": self.identity.kid}
        return sign({**base, **(header or {})}, delegation_claims(self.delegated, **claims), signer or self.identity)

    def session(
        self,
        *,
        header: dict[str, Any] | None = None,
        signer: Key | None = None,
        delegation: str | None = None,
        token: str | None = None,
        **claims: Any,
    ) -> str:
        base = {
            "alg": "ES256",
            "typ": "poppy-session+jwt",
            "kid": self.jkt,
            "poppy_dlg": self.delegation() if delegation is None else delegation,
        }
        if token is not None:
            claims.setdefault("ath", ath(token))
        return sign({**base, **(header or {})}, session_claims(**claims), signer or self.delegated)

    def verify(
        self,
        value: str,
        *,
        token: str | None = None,
        now: int = NOW,
        url: str = URL,
        method: str = METHOD,
        audience: str = ISSUER,
        keys: KeySet | None = None,
    ) -> DelegatedSession:
        return verify_poppy_session(
            parse_poppy_session(value),
            identity_keys=self.keys if keys is None else keys,
            audience=audience,
            method=method,
            url=url,
            now=now,
            access_token=token,
        )


ISSUER_KEY = ec_key("issuer-1")


def access_token(*, bound_to: str | None = None, key: ECKey = ISSUER_KEY, **changes: Any) -> str:
    values: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "acct_42",
        "aud": ISSUER,
        "client_id": CLIENT_ID,
        "scope": "poppy:read",
        "jti": jti(),
        "iat": NOW - 5,
        "exp": NOW + 900,
        "sgn": "sgn_1",
        "cnf": None if bound_to is None else Confirmation(jkt=bound_to),
    }
    values.update(changes)
    return mint_access_token(AccessTokenClaims(**values), key, key.kid or "issuer-1")


def issuer_keys() -> KeySet:
    return public_set(ISSUER_KEY)
