"""A fake Frontdoor issuer (JWKS + introspection behind httpx.MockTransport) and a fake agent.

Tokens are real: minted with the protocol library's ``mint_session_token`` and a joserfc
EC key; DPoP proofs are built with joserfc as a third-party agent would. Only the
network is fake, and the issuer trusts the Session state the test sets.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import httpx
from frontdoor_protocol import Confirmation, SessionTokenClaims, jwk_thumbprint, mint_session_token
from joserfc import jwt
from joserfc.jwk import ECKey

NOW = 1_790_000_000
ISSUER = "https://auth.frontdoor.test/northwind"
CREDENTIAL = "fdrs_northwind_" + "x" * 40
PUBLIC_URL = "https://northwind.example"
MCP_URL = f"{PUBLIC_URL}/mcp"
CLIENT_ID = "https://agent.example/client.json"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@dataclass
class SessionState:
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None


@dataclass
class FakeFrontdoor:
    """Serves ``{issuer}/jwks.json`` and ``{issuer}/oauth/introspect``."""

    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", parameters={"kid": "k1"}))
    sessions: dict[str, SessionState] = field(default_factory=dict)
    introspections: int = 0

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self._handle))

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and str(request.url) == f"{ISSUER}/jwks.json":
            return httpx.Response(200, json={"keys": [self.key.as_dict(private=False)]})
        if request.method == "POST" and str(request.url) == f"{ISSUER}/oauth/introspect":
            if request.headers.get("authorization") != f"Bearer {CREDENTIAL}":
                return httpx.Response(401, json={"error": "invalid_client"})
            self.introspections += 1
            token = parse_qs(request.content.decode())["token"][0]
            return httpx.Response(200, json=self._state(token))
        return httpx.Response(404)

    def _state(self, token: str) -> dict[str, Any]:
        claims = _claims_of(token)
        state = self.sessions.get(claims["sid"])
        if state is None:
            return {"active": False}
        answer = {
            "active": True,
            **{name: claims[name] for name in ("iss", "client_id", "sub", "sid", "exp", "iat")},
            "signed_in": state.signed_in,
            "account": state.account,
            "scope": state.scope,
            "token_type": "DPoP" if "cnf" in claims else "Bearer",
        }
        answer.update({name: claims[name] for name in ("cnf", "resource") if name in claims})
        return answer

    def session_token(self, agent: Agent, *, resource: str | None = None, **state: Any) -> str:
        """A Session Token for ``agent``, its Session in ``state`` (signed out by default)."""
        sid = f"ses_{secrets.token_hex(8)}"
        self.sessions[sid] = SessionState(**state)
        claims = SessionTokenClaims(
            iss=ISSUER,
            sub=agent.user_id,
            aud=resource or ISSUER,
            client_id=CLIENT_ID,
            sid=sid,
            jti=secrets.token_urlsafe(16),
            iat=NOW - 60,
            exp=NOW + 3600,
            cnf=Confirmation(jkt=agent.jkt),
            resource=resource,
        )
        return mint_session_token(claims, self.key, "k1")


@dataclass
class Agent:
    """A personal agent: its DPoP key and its User ID for the user."""

    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    user_id: str = field(default_factory=lambda: f"usr_{secrets.token_hex(8)}")

    @property
    def jkt(self) -> str:
        return jwk_thumbprint(self.key.as_dict(private=False))

    def proof(self, method: str, htu: str, token: str) -> str:
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.key.as_dict(private=False)}
        claims = {
            "jti": secrets.token_urlsafe(16),
            "htm": method,
            "htu": htu,
            "iat": NOW,
            "ath": _b64(hashlib.sha256(token.encode()).digest()),
        }
        return jwt.encode(header, claims, self.key)

    def auth(self, method: str, url: str, token: str, *, htu: str | None = None) -> dict[str, str]:
        """``Authorization: DPoP`` and a fresh proof for ``url`` (its query dropped)."""
        return {"Authorization": f"DPoP {token}", "DPoP": self.proof(method, htu or url.split("?", 1)[0], token)}
