"""The simulator's agent client: what any personal agent sends, built with joserfc.

A signed-out Session (PAP §4.5: the jwt-bearer grant, ``private_key_jwt`` client
authentication, a DPoP proof, RFC 9449 nonce retry), Device Sign-In (PAP §4.6: the device
authorization request, RFC 8628 §3.1, and the ``device_code`` grant's poll, §3.4),
revocation (RFC 7009, PAP §4.9), a refresh with the Account Token and a resource request
with the Session Token and its proof (the issuer's feedback endpoint, PAP §8). Every request
goes over HTTP through the SSRF-safe fetcher.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any, Final
from urllib.parse import urlencode

from frontdoor_core.outbound import FetchResult
from joserfc import jwt
from joserfc.jwk import ECKey

from .exchange import DecodedJwt, RecordingFetcher, redact_form
from .identity import SimulatorIdentity

__all__ = ["CLIENT_ASSERTION_TYPE", "DEVICE_CODE", "JWT_BEARER", "SimulatorAgent", "error_of", "json_of"]

JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE: Final = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_FORM: Final = "application/x-www-form-urlencoded"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class SimulatorAgent:
    """One run's agent: the tenant's simulator identity and a fresh DPoP key."""

    def __init__(self, identity: SimulatorIdentity, http: RecordingFetcher, *, now: int, user_id: str,
                 dpop_jwk: dict[str, Any] | None = None, nonce: str | None = None) -> None:
        self.identity = identity
        self.http = http
        self.now = now
        self.user_id = user_id
        # A run resumed after its sign-in keeps its DPoP key: its tokens are bound to it (RFC 9449 §6).
        self.dpop_key = ECKey.import_key(dpop_jwk) if dpop_jwk is not None else ECKey.generate_key("P-256")
        self.nonce: str | None = nonce

    def dpop_private_jwk(self) -> dict[str, Any]:
        """The DPoP key, private part included (kept only encrypted, `frontdoor_console.simulator.pending`)."""
        return dict(self.dpop_key.as_dict(private=True))

    def _sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode({"alg": "ES256", "kid": self.identity.kid}, claims, self.identity.key)

    def client_auth(self, issuer: str) -> dict[str, str]:
        """``private_key_jwt`` client authentication (RFC 7523 §2.2)."""
        cid = self.identity.client_id
        assertion = self._sign({"iss": cid, "sub": cid, "aud": issuer, "iat": self.now, "exp": self.now + 60,
                                "jti": secrets.token_urlsafe(16)})
        return {"client_id": cid, "client_assertion_type": CLIENT_ASSERTION_TYPE, "client_assertion": assertion}

    def dpop(self, method: str, url: str, token: str | None = None) -> str:
        """A DPoP proof (RFC 9449 §4.2), ``ath`` when it goes with a token."""
        claims: dict[str, Any] = {"htm": method, "htu": url, "iat": self.now, "jti": secrets.token_urlsafe(16)}
        if token is not None:
            claims["ath"] = _b64(hashlib.sha256(token.encode()).digest())
        if self.nonce is not None:
            claims["nonce"] = self.nonce
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.dpop_key.as_dict(private=False)}
        return jwt.encode(header, claims, self.dpop_key)

    async def _post_form(self, url: str, form: dict[str, str], headers: dict[str, str]) -> FetchResult:
        jwts: list[DecodedJwt] = []
        shown = redact_form(form, jwts)
        return await self.http.post(url, urlencode(form).encode(), headers={"Content-Type": _FORM, **headers},
                                    shown_body=shown, jwts=jwts)

    async def start_session(self, issuer: str, token_endpoint: str, extra: dict[str, str] | None = None
                            ) -> FetchResult:
        """A signed-out Session: retried once with the server's DPoP nonce when it asks for one.

        ``extra``: more form parameters (``resource`` and ``session_id`` for an MCP server's
        token, RFC 8707, PAP §4.3).
        """
        def form() -> dict[str, str]:
            return {"grant_type": JWT_BEARER, "assertion": self._sign({
                "iss": self.identity.client_id, "sub": self.user_id, "aud": issuer, "iat": self.now,
                "exp": self.now + 120, "jti": secrets.token_urlsafe(16)}), **(extra or {})}

        return await self.token(issuer, token_endpoint, form)

    async def token(self, issuer: str, token_endpoint: str, form: Any) -> FetchResult:
        """A client-authenticated token request with a DPoP proof, retried once with the server's nonce.

        ``form`` is the grant's parameters, or a callable making them (a fresh assertion per try).
        """
        result: FetchResult | None = None
        for _ in range(2):
            params = form() if callable(form) else form
            result = await self._post_form(token_endpoint, {**params, **self.client_auth(issuer)},
                                           {"DPoP": self.dpop("POST", token_endpoint)})
            self.nonce = result.headers.get("dpop-nonce", self.nonce)
            if not (result.status == 400 and _error(result) == "use_dpop_nonce"):
                break
        assert result is not None
        return result

    async def device_authorization(self, issuer: str, endpoint: str, scope: str) -> FetchResult:
        """Start Device Sign-In (RFC 8628 §3.1, PAP §4.6): client-authenticated, no DPoP."""
        return await self._post_form(endpoint, {**self.client_auth(issuer), "scope": scope}, {})

    async def poll_device(self, issuer: str, token_endpoint: str, device_code: str, session_id: str) -> FetchResult:
        """One poll of the ``device_code`` grant (RFC 8628 §3.4) for the Session ``session_id``."""
        return await self.token(issuer, token_endpoint, {"grant_type": DEVICE_CODE, "device_code": device_code,
                                                         "session_id": session_id})

    async def refresh(self, issuer: str, token_endpoint: str, account_token: str, session_id: str) -> FetchResult:
        """Sign in again with the Account Token (the ``refresh_token`` grant)."""
        return await self.token(issuer, token_endpoint, {"grant_type": "refresh_token",
                                                         "refresh_token": account_token, "session_id": session_id})

    async def revoke(self, issuer: str, revocation_endpoint: str, token: str, hint: str | None = None
                     ) -> FetchResult:
        """RFC 7009 revocation of ``token``, client-authenticated."""
        form = {"token": token, **({"token_type_hint": hint} if hint else {}), **self.client_auth(issuer)}
        return await self._post_form(revocation_endpoint, form, {})

    async def call(self, url: str, token: str, body: dict[str, Any], *, scheme: str = "DPoP",
                   accept: str | None = None) -> FetchResult:
        """A JSON POST with the token and (``DPoP`` scheme) its proof: a resource request."""
        raw = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"{scheme} {token}"}
        if accept is not None:
            headers["Accept"] = accept
        if scheme == "DPoP":
            headers["DPoP"] = self.dpop("POST", url, token)
        return await self.http.post(url, raw, headers=headers, shown_body=raw.decode())

    async def get(self, url: str, token: str) -> FetchResult:
        """A GET with the Session Token and its DPoP proof (``htu`` without the query, RFC 9449 §4.2)."""
        return await self.http.get(url, headers={"Accept": "application/json", "Authorization": f"DPoP {token}",
                                                 "DPoP": self.dpop("GET", url.split("?", 1)[0], token)})


def json_of(body: bytes) -> Any:
    """An answer's body as JSON, or None when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError:
        return None


def _error(result: FetchResult) -> str | None:
    doc = json_of(result.body)
    return doc.get("error") if isinstance(doc, dict) else None


def error_of(result: FetchResult) -> str | None:
    """The OAuth ``error`` of an answer (body, else the WWW-Authenticate challenge)."""
    found = _error(result)
    if found:
        return found
    challenge = result.headers.get("www-authenticate", "")
    marker = 'error="'
    if marker in challenge:
        return challenge.split(marker, 1)[1].split('"', 1)[0]
    return None
