"""One HTTP exchange of a simulator run, as the page shows it: secrets redacted.

Tokens, assertions and DPoP proofs never leave this module whole: a JWT is shown as its
decoded header and claims with the signature dropped; a token the agent holds is shown as
``[redacted]``; a ``jwk`` in a header keeps only its public members.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

import msgspec
from frontdoor_core.outbound import FetchError, FetchResult

__all__ = ["REDACTED", "DecodedJwt", "Exchange", "RecordingFetcher", "decode_jwt", "redact_form", "redact_json"]

REDACTED: Final = "[redacted]"
_SECRET_MEMBERS: Final = frozenset({"access_token", "refresh_token", "id_token", "token", "device_code", "code_verifier",
                                    "client_secret", "code"})
_JWT_MEMBERS: Final = frozenset({"client_assertion", "assertion"})
_PRIVATE_JWK: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "k"})
_SHOWN_RESPONSE_HEADERS: Final = ("content-type", "cache-control", "dpop-nonce", "www-authenticate", "location")


class DecodedJwt(msgspec.Struct, frozen=True, kw_only=True):
    """Where a JWT was, its header and claims; the signature is never kept."""

    where: str
    header: str
    claims: str


class Exchange(msgspec.Struct, kw_only=True):
    """One request and its response (or the fetch error)."""

    method: str
    url: str
    status: int | None = None
    elapsed_ms: float = 0.0
    request_headers: list[tuple[str, str]] = msgspec.field(default_factory=list)
    request_body: str = ""
    response_headers: list[tuple[str, str]] = msgspec.field(default_factory=list)
    response_body: str = ""
    jwts: list[DecodedJwt] = msgspec.field(default_factory=list)
    error: str = ""


def _b64json(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def decode_jwt(where: str, token: str) -> DecodedJwt | None:
    """The header and claims of a compact JWS (unverified: for display), or None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        header, claims = _b64json(parts[0]), _b64json(parts[1])
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(header, dict) and isinstance(header.get("jwk"), dict):
        header["jwk"] = {k: v for k, v in header["jwk"].items() if k not in _PRIVATE_JWK}
    return DecodedJwt(where=where, header=json.dumps(header, indent=2), claims=json.dumps(claims, indent=2))


def redact_form(form: Mapping[str, str], jwts: list[DecodedJwt]) -> str:
    """A form body for display: JWT members decoded into ``jwts``, tokens redacted."""
    shown: list[str] = []
    for name, value in form.items():
        if name in _JWT_MEMBERS:
            decoded = decode_jwt(name, value)
            if decoded is not None:
                jwts.append(decoded)
            shown.append(f"{name}={REDACTED} (a signed JWT, decoded below)")
        elif name in _SECRET_MEMBERS:
            shown.append(f"{name}={REDACTED}")
        else:
            shown.append(f"{name}={value}")
    return "\n".join(shown)


def redact_json(body: bytes, jwts: list[DecodedJwt]) -> str:
    """A JSON response body for display: tokens decoded (when JWTs) and redacted."""
    if not body:
        return ""
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:2000].decode("utf-8", "replace")
    if isinstance(doc, dict):
        for name in sorted(set(doc) & _SECRET_MEMBERS):
            if isinstance(doc[name], str):
                decoded = decode_jwt(f"response {name}", doc[name])
                if decoded is not None:
                    jwts.append(decoded)
            doc[name] = REDACTED
    return json.dumps(doc, indent=2)[:20_000]


def _response_headers(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(h, headers[h]) for h in _SHOWN_RESPONSE_HEADERS if h in headers]


def request_header_view(headers: Mapping[str, str], jwts: list[DecodedJwt]) -> list[tuple[str, str]]:
    """Request headers for display: ``Authorization`` redacted, a DPoP proof decoded."""
    out: list[tuple[str, str]] = []
    for name, value in headers.items():
        if name.lower() == "authorization":
            scheme = value.split(" ", 1)[0]
            out.append((name, f"{scheme} {REDACTED}"))
        elif name.lower() == "dpop":
            decoded = decode_jwt("DPoP proof", value)
            if decoded is not None:
                jwts.append(decoded)
            out.append((name, f"{REDACTED} (a DPoP proof, decoded below)"))
        else:
            out.append((name, value))
    return out


class RecordingFetcher:
    """The SSRF-safe fetcher, each exchange written down for the page."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.exchanges: list[Exchange] = []

    async def fetch(self, url: str, *, accept_json: bool = True) -> FetchResult:
        ex = Exchange(method="GET", url=url)
        self.exchanges.append(ex)
        started = time.monotonic()
        try:
            result: FetchResult = await self.inner.fetch(url, accept_json=accept_json)
        except FetchError as exc:
            ex.elapsed_ms = (time.monotonic() - started) * 1000
            ex.status, ex.error = exc.status, f"{exc.code}: {exc}"
            raise
        ex.elapsed_ms = (time.monotonic() - started) * 1000
        ex.status, ex.response_headers = result.status, _response_headers(result.headers)
        if result.final_url != url:
            ex.error = f"redirected to {result.final_url}"
        ex.response_body = redact_json(result.body, ex.jwts)
        return result

    async def get(self, url: str, *, headers: Mapping[str, str]) -> FetchResult:
        """GET once with ``headers`` (no redirects), any status, and record it."""
        ex = Exchange(method="GET", url=url)
        ex.request_headers = request_header_view(headers, ex.jwts)
        self.exchanges.append(ex)
        started = time.monotonic()
        try:
            result: FetchResult = await self.inner.get(url, headers=headers)
        except FetchError as exc:
            ex.elapsed_ms = (time.monotonic() - started) * 1000
            ex.error = f"{exc.code}: {exc}"
            raise
        ex.elapsed_ms = (time.monotonic() - started) * 1000
        ex.status, ex.response_headers = result.status, _response_headers(result.headers)
        ex.response_body = redact_json(result.body, ex.jwts)
        return result

    async def post(self, url: str, body: bytes, *, headers: Mapping[str, str], shown_body: str,
                   jwts: list[DecodedJwt] | None = None) -> FetchResult:
        """POST once (no redirects) and record it; ``shown_body`` is the redacted body."""
        ex = Exchange(method="POST", url=url, jwts=list(jwts or []))
        ex.request_headers = request_header_view(headers, ex.jwts)
        ex.request_body = shown_body
        self.exchanges.append(ex)
        started = time.monotonic()
        try:
            result: FetchResult = await self.inner.post(url, body, headers=headers)
        except FetchError as exc:
            ex.elapsed_ms = (time.monotonic() - started) * 1000
            ex.error = f"{exc.code}: {exc}"
            raise
        ex.elapsed_ms = (time.monotonic() - started) * 1000
        ex.status, ex.response_headers = result.status, _response_headers(result.headers)
        ex.response_body = redact_json(result.body, ex.jwts)
        return result


def parse_form(body: str) -> dict[str, str]:
    """A urlencoded body as a dict (for display of what was sent)."""
    return dict(parse_qsl(body, keep_blank_values=True))
