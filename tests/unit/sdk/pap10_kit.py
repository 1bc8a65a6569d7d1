"""A fake Frontdoor for PAP 1.0 (JWKS, agent-keys, session-state over httpx.MockTransport)
and a 1.0 agent that signs real delegations and Session JWTs with the protocol library's
agent-side helpers. Only the network is fake; the fake's state model follows ADR 0004 §5-§6.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx
from frontdoor_protocol import (
    AccessTokenClaims,
    Confirmation,
    jwk_thumbprint,
    mint_access_token,
    mint_delegation,
    mint_poppy_session,
)
from joserfc.jwk import ECKey

from .kit import CREDENTIAL, ISSUER, NOW, Agent

AGENT_CLIENT = "https://agent10.example/client.json"


@dataclass
class Session10:
    sub: str
    agent_id: str | None
    ended: bool = False
    jtis: set[str] = field(default_factory=set)


@dataclass
class Fake10:
    """Serves ``jwks.json``, ``poppy/agent-keys`` and ``poppy/session-state`` as ADR 0004 §6 says."""

    issuer: str = ISSUER
    credential: str = CREDENTIAL
    now: int = NOW
    issuer_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", parameters={"kid": "i1"}))
    identity: dict[str, list[ECKey]] = field(default_factory=dict)
    sessions: dict[tuple[str, str], Session10] = field(default_factory=dict)
    sign_ins: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # sgn -> client, account, scope
    refused_clients: set[str] = field(default_factory=set)
    key_asks: list[dict[str, Any]] = field(default_factory=list)
    state_asks: list[dict[str, Any]] = field(default_factory=list)
    jwks_calls: int = 0
    keys_status: int = 200
    state_status: int = 200
    max_age: int = 300

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if request.method == "GET" and url == f"{self.issuer}/jwks.json":
            self.jwks_calls += 1
            return httpx.Response(200, json={"keys": [self.issuer_key.as_dict(private=False)]})
        if request.method != "POST" or request.headers.get("authorization") != f"Bearer {self.credential}":
            return httpx.Response(404 if request.method != "POST" else 401, json={"error": "invalid_client"})
        body = json.loads(request.content)
        if url == f"{self.issuer}/poppy/agent-keys":
            self.key_asks.append(body)
            if self.keys_status != 200:
                return httpx.Response(self.keys_status, headers={"Retry-After": "11"})
            if body["client_id"] in self.refused_clients:
                return httpx.Response(403, json={"error": "invalid_client"})
            keys = [k.as_dict(private=False) for k in self.identity.get(body["client_id"], [])]
            return httpx.Response(200, json={"client_id": body["client_id"], "keys": keys, "max_age": self.max_age})
        if url == f"{self.issuer}/poppy/session-state":
            self.state_asks.append(body)
            if self.state_status != 200:
                return httpx.Response(self.state_status, headers={"Retry-After": "13"})
            return httpx.Response(200, json=self._state(body))
        return httpx.Response(404)

    def _state(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["client_id"] in self.refused_clients:
            return {"state": "refused", "signed_in": False}
        key = (body["client_id"], body["sid"])
        session = self.sessions.setdefault(key, Session10(sub=body["sub"], agent_id=body.get("agent_id")))
        internal = f"ses_{abs(hash(key)) % 10**8}"
        if body["jti"] in session.jtis:
            return {"state": "replayed", "session": internal, "signed_in": False}
        session.jtis.add(body["jti"])
        if session.ended:
            return {"state": "ended", "session": internal, "signed_in": False}
        if session.sub != body["sub"] or session.agent_id != body.get("agent_id"):
            return {"state": "mismatch", "session": internal, "signed_in": False}
        answer: dict[str, Any] = {"state": "active", "session": internal, "signed_in": False}
        sign_in = self.sign_ins.get(body.get("sgn") or "")
        if sign_in is not None and sign_in[0] == body["client_id"]:
            answer.update(signed_in=True, account=sign_in[1], scope=sign_in[2])
        return answer

    def access_token(self, agent: Agent10, *, account: str = "acct_1", scope: str = "orders:read",
                     audience: str | None = None, dpop: Agent | None = None, key: ECKey | None = None) -> str:
        """An access token of a live sign-in (its sgn registered as live)."""
        sgn = f"sgn_{secrets.token_hex(6)}"
        self.sign_ins[sgn] = (agent.client_id, account, scope)
        signer = key or self.issuer_key
        claims = AccessTokenClaims(
            iss=self.issuer, sub=account, aud=audience or self.issuer, client_id=agent.client_id, scope=scope,
            jti=secrets.token_urlsafe(12), iat=self.now, exp=self.now + 900, sgn=sgn,
            cnf=Confirmation(jkt=dpop.jkt) if dpop is not None else None,
        )
        return mint_access_token(claims, signer, str(signer.kid))

    def revoke(self, token: str) -> None:
        payload = token.split(".")[1]
        import base64

        sgn = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sgn"]
        del self.sign_ins[sgn]


@dataclass
class Agent10:
    """A 1.0 agent: an identity key published through ``fake``, a delegated key, a Session."""

    fake: Fake10
    client_id: str = AGENT_CLIENT
    sid: str = field(default_factory=lambda: f"s{secrets.token_hex(8)}")
    sub: str = field(default_factory=lambda: f"u{secrets.token_hex(8)}")
    agent_id: str | None = None
    identity_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256", parameters={"kid": "id1"}))
    delegated_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    publish: bool = True

    def __post_init__(self) -> None:
        if self.publish:
            self.fake.identity.setdefault(self.client_id, []).append(self.identity_key)
        self.delegation = mint_delegation(
            identity_key=self.identity_key, kid=str(self.identity_key.kid), client_id=self.client_id,
            delegated_key=self.delegated_key, iat=self.fake.now - 60, exp=self.fake.now + 3600, jti=secrets.token_urlsafe(12),
        )

    @property
    def delegated_jkt(self) -> str:
        return jwk_thumbprint(self.delegated_key.as_dict(private=False))

    def session_jwt(self, method: str, url: str, *, access_token: str | None = None,
                    audience: str | None = None, iat: int | None = None, **overrides: Any) -> str:
        return mint_poppy_session(
            delegated_key=self.delegated_key, delegation=overrides.pop("delegation", self.delegation),
            client_id=self.client_id, audience=audience or self.fake.issuer, sid=overrides.pop("sid", self.sid),
            sub=overrides.pop("sub", self.sub), method=method, url=url.split("?", 1)[0],
            iat=self.fake.now if iat is None else iat,
            jti=overrides.pop("jti", secrets.token_urlsafe(12)), access_token=access_token,
            agent_id=overrides.pop("agent_id", self.agent_id),
        )

    def headers(self, method: str, url: str, *, access_token: str | None = None, scheme: str = "Bearer",
                dpop: Agent | None = None, **overrides: Any) -> list[tuple[str, str]]:
        headers = [("Poppy-Session", self.session_jwt(method, url, access_token=access_token, **overrides))]
        if access_token is not None:
            headers.append(("Authorization", f"{scheme} {access_token}"))
            if dpop is not None:
                headers.append(("DPoP", dpop.proof(method, url.split("?", 1)[0], access_token)))
        return headers
