"""A fake Frontdoor (JWKS + introspection over httpx.MockTransport) and a fake agent.

The issuer side mints real Session Tokens with the issuer's minting code and a joserfc EC
key; the agent side makes real DPoP proofs with joserfc. Only the network is fake.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

import httpx
from frontdoor_protocol import Confirmation, SessionTokenClaims, jwk_thumbprint, mint_session_token
from joserfc import jwt
from joserfc.jwk import ECKey

NOW = 1_780_000_000
ISSUER = "https://auth.frontdoor.example/shop-a"
CREDENTIAL = "fdrs_AbCdEf12_" + "x" * 43
CLIENT_ID = "https://agent.example/.well-known/client.json"
PUBLIC = "https://shop.example"
API_URL = f"{PUBLIC}/api/orders"
MCP_URL = f"{PUBLIC}/mcp"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime.fromtimestamp(NOW + 5, UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class SessionRecord:
    active: bool = True
    signed_in: bool = False
    account: str | None = None
    scope: str | None = None


@dataclass
class FakeFrontdoor:
    """Serves ``{issuer}/jwks.json`` and ``{issuer}/oauth/introspect`` as the contract says."""

    keys: list[ECKey] = field(default_factory=lambda: [ECKey.generate_key("P-256", parameters={"kid": "k1"})])
    sessions: dict[str, SessionRecord] = field(default_factory=dict)
    jwks_calls: int = 0
    introspections: list[dict[str, Any]] = field(default_factory=list)
    jwks_status: int = 200
    introspection_status: int = 200
    introspection_body: bytes | None = None
    unreachable: bool = False
    answer_sid: str | None = None  # answer about another Session than asked

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.unreachable:
            raise httpx.ConnectError("unreachable", request=request)
        if request.method == "GET" and str(request.url) == f"{ISSUER}/jwks.json":
            self.jwks_calls += 1
            if self.jwks_status != 200:
                return httpx.Response(self.jwks_status)
            return httpx.Response(200, json={"keys": [key.as_dict(private=False) for key in self.keys]})
        if request.method == "POST" and str(request.url) == f"{ISSUER}/oauth/introspect":
            form = {name: values[0] for name, values in parse_qs(request.content.decode()).items()}
            self.introspections.append({"authorization": request.headers.get("authorization"), **form})
            if request.headers.get("authorization") != f"Bearer {CREDENTIAL}":
                return httpx.Response(401, json={"error": "invalid_client"})
            if self.introspection_status != 200:
                return httpx.Response(self.introspection_status, headers={"Retry-After": "7"})
            if self.introspection_body is not None:
                return httpx.Response(200, content=self.introspection_body)
            return httpx.Response(200, json=self.state_of(form["token"]))
        return httpx.Response(404)

    def state_of(self, token: str) -> dict[str, Any]:
        # The real endpoint verifies the token; the fake trusts what the test minted.
        claims = _segment(token, 1)
        record = self.sessions.get(claims["sid"])
        if record is None or not record.active:
            return {"active": False}
        body: dict[str, Any] = {
            "active": True,
            "iss": claims["iss"],
            "client_id": claims["client_id"],
            "sub": claims["sub"],
            "sid": self.answer_sid or claims["sid"],
            "signed_in": record.signed_in,
            "account": record.account,
            "scope": record.scope,
            "exp": claims["exp"],
            "iat": claims["iat"],
            "token_type": "DPoP" if "cnf" in claims else "Bearer",
        }
        if "cnf" in claims:
            body["cnf"] = claims["cnf"]
        if "resource" in claims:
            body["resource"] = claims["resource"]
        return body

    def mint(
        self,
        agent: Agent,
        *,
        sid: str | None = None,
        resource: str | None = None,
        bound: bool = True,
        key: ECKey | None = None,
        **record: Any,
    ) -> str:
        """A Session Token for ``agent``, with its Session's state registered."""
        sid = sid or f"ses_{secrets.token_hex(8)}"
        self.sessions.setdefault(sid, SessionRecord(**record))
        signer = key or self.keys[0]
        claims = SessionTokenClaims(
            iss=ISSUER,
            sub=agent.user_id,
            aud=resource or ISSUER,
            client_id=CLIENT_ID,
            sid=sid,
            jti=secrets.token_urlsafe(16),
            iat=NOW,
            exp=NOW + 3600,
            cnf=Confirmation(jkt=agent.jkt) if bound else None,
            resource=resource,
        )
        return mint_session_token(claims, signer, str(signer.kid))


def _segment(token: str, index: int) -> dict[str, Any]:
    segment = token.split(".")[index]
    return dict(json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))))


@dataclass
class Agent:
    """A personal agent's DPoP key and User ID."""

    key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    user_id: str = field(default_factory=lambda: f"usr_{secrets.token_hex(8)}")

    @property
    def jkt(self) -> str:
        return jwk_thumbprint(self.key.as_dict(private=False))

    def proof(self, method: str, url: str, token: str | None, **claims: Any) -> str:
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.key.as_dict(private=False)}
        payload: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": NOW}
        if token is not None:
            payload["ath"] = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()
        payload.update(claims)
        return jwt.encode(header, payload, self.key)

    def headers(self, method: str, url: str, token: str, **claims: Any) -> list[tuple[str, str]]:
        """``Authorization: DPoP`` and a fresh proof for ``url`` (query and fragment dropped)."""
        htu = url.split("?", 1)[0]
        return [("Authorization", f"DPoP {token}"), ("DPoP", self.proof(method, htu, token, **claims))]
