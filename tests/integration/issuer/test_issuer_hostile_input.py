"""Hostile input at every issuer endpoint: a clear 4xx, never a 5xx, and nothing echoed."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle

POST_PATHS = ["oauth/token", "oauth/device", "oauth/revoke", "oauth/introspect", "oauth/mediated", "feedback",
              "accounts/disconnect", "browser/verify", "browser/state", "login/callback"]

BODIES: dict[str, tuple[str, bytes]] = {
    "malformed_json": ("application/json", b'{"a": '),
    "duplicate_members": ("application/json", b'{"token": "a", "token": "b"}'),
    "array": ("application/json", b"[1, 2, 3]"),
    "nul_form": ("application/x-www-form-urlencoded", b"grant_type=%00&token=%00"),
    "repeated_form": ("application/x-www-form-urlencoded", b"token=a&token=b&grant_type=x&grant_type=y"),
    "garbage_form": ("application/x-www-form-urlencoded", b"%%%&&&===\xff\xfe"),
    "wrong_type": ("text/plain", b"hello"),
    "huge": ("application/x-www-form-urlencoded", b"token=" + b"A" * 200_000),
    "secret_looking": ("application/x-www-form-urlencoded",
                       b"refresh_token=fdat_SECRETVALUE1234567890&client_assertion=eyJhbGciOiJub25lIn0.eyJ9.x"),
}


@pytest.mark.parametrize("path", POST_PATHS)
@pytest.mark.parametrize("body", list(BODIES))
async def test_hostile_bodies_are_refused_cleanly(issuer: AsyncTestClient[Any], tenant: TenantHandle, path: str,
                                                  body: str) -> None:
    ctype, content = BODIES[body]
    r = await issuer.post(f"/{tenant.slug}/{path}", content=content,
                          headers={"Content-Type": ctype, "Authorization": "Bearer fdrs_nope"})
    assert 400 <= r.status_code < 500, (path, body, r.status_code, r.text[:200])
    assert "SECRETVALUE" not in r.text and "eyJhbGciOiJub25lIn0" not in r.text


@pytest.mark.parametrize("path", ["device", "consent", "oauth/authorize", "accounts/x/agents",
                                  "oauth/authorize?client_id=%00&redirect_uri=%00"])
async def test_hostile_queries_are_refused_cleanly(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                   path: str) -> None:
    r = await issuer.get(f"/{tenant.slug}/{path}", headers={"Authorization": "Bearer fdrs_nope"})
    assert r.status_code < 500, (path, r.status_code, r.text[:200])
