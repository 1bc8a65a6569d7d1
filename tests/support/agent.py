"""A personal agent for tests: its identity key, metadata document, assertions and DPoP proofs.

Everything an agent sends is built here with joserfc, independently of Frontdoor's own
verification code, so tests exercise the endpoint the way a third-party agent would.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey

from tests.support.mock_web import MockWeb

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass
class TestAgent:
    host: str
    name: str = "Test Agent"
    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", parameters={"use": "sig", "alg": "ES256"}))
    dpop_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def client_id(self) -> str:
        return f"https://{self.host}/agent.json"

    @property
    def kid(self) -> str:
        return self.key.thumbprint()

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "client_id": self.client_id,
            "client_name": self.name,
            "jwks_uri": f"https://{self.host}/jwks.json",
            "redirect_uris": [f"https://{self.host}/callback"],
            "token_endpoint_auth_method": "private_key_jwt",
        }
        if self.extensions:
            doc["extensions"] = self.extensions
        return doc

    def jwks(self) -> dict[str, Any]:
        public = self.key.as_dict(private=False)
        public.update({"kid": self.kid, "use": "sig", "alg": "ES256"})
        return {"keys": [public]}

    def publish(self, web: MockWeb) -> TestAgent:
        web.serve(self.client_id, json=self.metadata(), headers={"cache-control": "max-age=300"})
        web.serve(f"https://{self.host}/jwks.json", json=self.jwks(), headers={"cache-control": "max-age=300"})
        return self

    def _sign(self, claims: dict[str, Any], header: dict[str, Any] | None = None, key: ECKey | None = None) -> str:
        h = {"alg": "ES256", "kid": self.kid, **(header or {})}
        return jwt.encode(h, claims, key or self.key)

    def client_assertion(self, issuer: str, **over: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.client_id, "sub": self.client_id, "aud": issuer, "iat": now, "exp": now + 60,
                  "jti": secrets.token_urlsafe(16)}
        claims.update(over)
        return self._sign({k: v for k, v in claims.items() if v is not None})

    def session_assertion(self, issuer: str, user: str, **over: Any) -> str:
        now = int(time.time())
        claims = {"iss": self.client_id, "sub": user, "aud": issuer, "iat": now, "exp": now + 120,
                  "jti": secrets.token_urlsafe(16)}
        claims.update(over)
        return self._sign({k: v for k, v in claims.items() if v is not None})

    def dpop(self, method: str, url: str, *, token: str | None = None, nonce: str | None = None,
             key: ECKey | None = None, **over: Any) -> str:
        k = key or self.dpop_key
        claims: dict[str, Any] = {"htm": method, "htu": url, "iat": int(time.time()), "jti": secrets.token_urlsafe(16)}
        if token is not None:
            claims["ath"] = b64(hashlib.sha256(token.encode()).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        claims.update(over)
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": k.as_dict(private=False)}
        return jwt.encode(header, {k2: v for k2, v in claims.items() if v is not None}, k)

    def token_form(self, issuer: str, user: str, **extra: str) -> dict[str, str]:
        form = {
            "grant_type": JWT_BEARER,
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": self.client_assertion(issuer),
            "assertion": self.session_assertion(issuer, user),
        }
        form.update(extra)
        return form
