"""The client assertion Frontdoor sends to a company's IdP for ``private_key_jwt``.

RFC 7523 §2.2 and §3, OpenID Connect Core 1.0 §9: a JWT signed (ES256) with the tenant's
client key (`frontdoor_tenancy.oidc_client_key`), ``iss`` and ``sub`` Frontdoor's
``client_id`` at the IdP, ``aud`` the IdP's token endpoint, a fresh ``jti``, and a short
life (60 s). Pure: the caller passes the key and the time.
"""

from __future__ import annotations

import secrets
from typing import Final

from joserfc import jwt
from joserfc.jwk import ECKey

__all__ = ["ASSERTION_LIFETIME", "JWT_BEARER_ASSERTION", "client_assertion"]

JWT_BEARER_ASSERTION: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME: Final = 60
"""Seconds a client assertion is valid."""


def client_assertion(key: ECKey, *, client_id: str, audience: str, now: int) -> str:
    """A signed client assertion for one token request at ``audience`` (the token endpoint)."""
    header = {"alg": "ES256", "kid": key.kid, "typ": "JWT"}
    claims = {"iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + ASSERTION_LIFETIME,
              "jti": secrets.token_urlsafe(24)}
    return jwt.encode(header, claims, key, algorithms=["ES256"])
