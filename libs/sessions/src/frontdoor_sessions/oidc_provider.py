"""A tenant's OpenID Provider as Frontdoor knows it: discovered metadata and its keys.

:func:`discover` reads ``{issuer}/.well-known/openid-configuration`` (OpenID Connect
Discovery 1.0 §4) through the SSRF-safe fetcher and checks it (the document's ``issuer``
equals the configured one exactly, §4.3; the endpoints are https, or loopback http in
development; PKCE ``S256`` is not refused). :func:`provider_keys` reads its ``jwks_uri``.
Both are cached in Redis for :data:`METADATA_TTL` seconds (hot, disposable);
:func:`refetched_keys` refetches the JWKS after an unknown ``kid`` at most once per
:data:`KEYS_REFETCH_INTERVAL` seconds, which is how the IdP's key rotation is followed.
"""

from __future__ import annotations

import contextlib
import hashlib
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.outbound import FetchError, SafeFetcher
from frontdoor_core.redis_keys import shard
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from .oidc_id_token import ASYMMETRIC_ALGORITHMS

__all__ = [
    "KEYS_REFETCH_INTERVAL",
    "METADATA_TTL",
    "ProviderMetadata",
    "ProviderProblem",
    "ProviderUnavailable",
    "check_provider",
    "discover",
    "provider_keys",
    "refetched_keys",
]

METADATA_TTL: Final = 300
"""Seconds discovered metadata and fetched keys are reused."""
KEYS_REFETCH_INTERVAL: Final = 30
"""Least seconds between two JWKS refetches caused by an unknown ``kid``."""


class ProviderProblem(StrEnum):
    """What is wrong with the IdP (stable, safe to show an admin; names no value)."""

    UNREACHABLE = "unreachable"
    """Discovery could not be fetched (down, not found, not JSON, blocked address)."""
    NOT_METADATA = "not_metadata"
    """The document is not OpenID Provider metadata (a required member is missing or of the wrong type)."""
    ISSUER_MISMATCH = "issuer_mismatch"
    """The document's ``issuer`` is not the configured issuer, character for character."""
    INSECURE_ENDPOINT = "insecure_endpoint"
    """An endpoint is not https (loopback http only in development)."""
    NO_PKCE = "no_pkce"
    """The IdP advertises code challenge methods without ``S256``."""
    NO_USABLE_ALGORITHM = "no_usable_algorithm"
    """The IdP signs ID tokens with no public-key algorithm Frontdoor accepts."""
    KEYS_UNAVAILABLE = "keys_unavailable"
    """The JWKS could not be fetched, or holds no usable public key."""


class ProviderUnavailable(Exception):
    """The IdP cannot be used now; ``problem`` says why."""

    def __init__(self, problem: ProviderProblem) -> None:
        super().__init__(f"identity provider unavailable: {problem}")
        self.problem = problem


class ProviderMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The members of the IdP's metadata Frontdoor uses (Discovery §3)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str | None = None
    id_token_signing_alg_values_supported: list[str] = msgspec.field(default_factory=lambda: ["RS256"])
    code_challenge_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False
    token_endpoint_auth_methods_supported: list[str] | None = None
    backchannel_logout_supported: bool = False

    def algorithms(self) -> frozenset[str]:
        """The public-key algorithms the IdP may sign ID tokens with."""
        return frozenset(self.id_token_signing_alg_values_supported) & ASYMMETRIC_ALGORITHMS


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def _secure(url: str, *, allow_http_loopback: bool) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.username or parts.password or parts.fragment or not parts.hostname:
        return False
    return parts.scheme == "https" or (allow_http_loopback and parts.scheme == "http"
                                       and parts.hostname in {"127.0.0.1", "localhost", "::1"})


def _parse(body: bytes | str, issuer: str, *, allow_http_loopback: bool) -> ProviderMetadata:
    try:
        meta = msgspec.json.decode(body, type=ProviderMetadata)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ProviderUnavailable(ProviderProblem.NOT_METADATA) from None
    if meta.issuer != issuer:
        raise ProviderUnavailable(ProviderProblem.ISSUER_MISMATCH)
    endpoints = [meta.authorization_endpoint, meta.token_endpoint, meta.jwks_uri]
    if meta.userinfo_endpoint is not None:
        endpoints.append(meta.userinfo_endpoint)
    if not all(_secure(u, allow_http_loopback=allow_http_loopback) for u in endpoints):
        raise ProviderUnavailable(ProviderProblem.INSECURE_ENDPOINT)
    if meta.code_challenge_methods_supported is not None and "S256" not in meta.code_challenge_methods_supported:
        raise ProviderUnavailable(ProviderProblem.NO_PKCE)
    if not meta.algorithms():
        raise ProviderUnavailable(ProviderProblem.NO_USABLE_ALGORITHM)
    return meta


async def discover(issuer: str, *, tenant_id: str, fetcher: SafeFetcher, redis: aioredis.Redis,
                   fresh: bool = False) -> ProviderMetadata:
    """The IdP's checked metadata (cached; ``fresh`` skips the cache, for "test connection").

    Raises:
        ProviderUnavailable: The metadata cannot be fetched or is not acceptable.
    """
    loopback = fetcher.policy.allow_http_loopback
    key = f"oidc:meta:{shard(tenant_id)}:{_digest(issuer)}"
    if not fresh:
        with contextlib.suppress(Exception):
            cached = await redis.get(key)
            if cached is not None:
                return _parse(cached, issuer, allow_http_loopback=loopback)
    try:
        result = await fetcher.fetch(issuer.rstrip("/") + "/.well-known/openid-configuration")
    except FetchError:
        raise ProviderUnavailable(ProviderProblem.UNREACHABLE) from None
    meta = _parse(result.body, issuer, allow_http_loopback=loopback)
    with contextlib.suppress(Exception):
        await redis.set(key, result.body, ex=METADATA_TTL)
    return meta


def _key_set(body: bytes | str) -> KeySet:
    try:
        document = msgspec.json.decode(body)
        public = [k for k in document["keys"] if isinstance(k, dict) and "d" not in k
                  and k.get("use", "sig") == "sig" and k.get("kty") in ("RSA", "EC", "OKP")]
        keys = KeySet.import_key_set({"keys": public})
    except (msgspec.DecodeError, KeyError, TypeError, ValueError, JoseError):
        raise ProviderUnavailable(ProviderProblem.KEYS_UNAVAILABLE) from None
    if not keys.keys:
        raise ProviderUnavailable(ProviderProblem.KEYS_UNAVAILABLE)
    return keys


async def _fetch_keys(meta: ProviderMetadata, key: str, fetcher: SafeFetcher, redis: aioredis.Redis) -> KeySet:
    try:
        result = await fetcher.fetch(meta.jwks_uri)
    except FetchError:
        raise ProviderUnavailable(ProviderProblem.KEYS_UNAVAILABLE) from None
    keys = _key_set(result.body)
    with contextlib.suppress(Exception):  # caching is an optimisation
        await redis.set(key, result.body, ex=METADATA_TTL)
    return keys


async def provider_keys(meta: ProviderMetadata, *, tenant_id: str, fetcher: SafeFetcher, redis: aioredis.Redis,
                        fresh: bool = False) -> KeySet:
    """The IdP's public signing keys (cached).

    Raises:
        ProviderUnavailable: ``keys_unavailable``.
    """
    key = f"oidc:jwks:{shard(tenant_id)}:{_digest(meta.jwks_uri)}"
    if not fresh:
        with contextlib.suppress(Exception):
            cached = await redis.get(key)
            if cached is not None:
                return _key_set(cached)
    return await _fetch_keys(meta, key, fetcher, redis)


async def refetched_keys(meta: ProviderMetadata, *, tenant_id: str, fetcher: SafeFetcher,
                         redis: aioredis.Redis) -> KeySet | None:
    """Fresh keys after an unknown ``kid``; None when a refetch happened less than 30 s ago.

    Raises:
        ProviderUnavailable: ``keys_unavailable``.
        Unavailable: Redis could not answer (the refetch limit fails closed).
    """
    try:
        allowed = await redis.set(f"oidc:jwks-refetch:{shard(tenant_id)}:{_digest(meta.jwks_uri)}", b"1", nx=True,
                                  ex=KEYS_REFETCH_INTERVAL)
    except Exception:
        raise Unavailable("login_state_unavailable", "Temporarily unavailable; retry shortly.", retry_after=5) from None
    if not allowed:
        return None
    return await _fetch_keys(meta, f"oidc:jwks:{shard(tenant_id)}:{_digest(meta.jwks_uri)}", fetcher, redis)


async def check_provider(issuer: str, *, tenant_id: str, fetcher: SafeFetcher, redis: aioredis.Redis) -> ProviderMetadata:
    """Discovery and the JWKS, both fetched afresh (the dashboard's "test connection", a save).

    Raises:
        ProviderUnavailable: What is wrong.
    """
    meta = await discover(issuer, tenant_id=tenant_id, fetcher=fetcher, redis=redis, fresh=True)
    await provider_keys(meta, tenant_id=tenant_id, fetcher=fetcher, redis=redis, fresh=True)
    return meta
