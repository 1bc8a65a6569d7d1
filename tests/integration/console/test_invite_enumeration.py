"""Inviting another tenant's admin answers exactly like inviting an unknown email, and the
email still belongs to one tenant only: the invitation cannot be accepted."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.integration.console.test_dashboard import sign_in


def _shape(html: str, email: str, token: str) -> str:
    """The page with what legitimately differs (the email typed, the token, IDs, times, CSRF) blanked."""
    out = html.replace(email, "EMAIL").replace(token, "TOKEN")
    out = re.sub(r"inv_[0-9A-Z]+", "INV", out)
    out = re.sub(r'name="_csrf_token" value="[^"]+"', "CSRF", out)
    return re.sub(r"\d{4}-\d\d-\d\d[ T][0-9:.]+(?:\+00:00|Z| UTC)?", "TIME", out)


async def _invite(console: AsyncTestClient[Any], csrf: str, email: str) -> tuple[Any, str]:
    r = await console.post("/team/invites", data={"email": email, "role": "viewer", "_csrf_token": csrf})
    m = re.search(r"/invite/([A-Za-z0-9_-]+)</code>", r.text)
    return r, m.group(1) if m else ""


async def test_another_tenants_admin_is_invited_like_a_stranger(
        console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    stranger = f"{unique('nobody-')}@example.com"
    known, known_token = await _invite(console, csrf, other_tenant.email)
    unknown, unknown_token = await _invite(console, csrf, stranger)
    assert known.status_code == unknown.status_code == 201
    # the pages differ only in the email typed, the token and the expiry time
    def notice(r: Any, email: str, token: str) -> str:
        block = re.search(r'<section class="secret" role="status">.*?</section>', r.text, re.S)
        assert block, "the invitation is shown"
        return _shape(block.group(0), email, token)

    assert notice(known, other_tenant.email, known_token) == notice(unknown, stranger, unknown_token)
    assert '<p class="error" role="alert">' not in known.text and "already" not in known.text
    assert await db.fetchval("SELECT count(*) FROM admin_invites WHERE tenant_id = $1 AND accepted_at IS NULL"
                             " AND revoked_at IS NULL", tenant.id) == 2
    console.cookies.clear()

    # the other tenant's admin follows the link: they cannot join a second tenant
    page = await console.get(f"/invite/{known_token}")
    form_csrf = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    r = await console.post(f"/invite/{known_token}", data={"password": STRONG_PASSWORD, "_csrf_token": form_csrf})
    assert r.status_code == 422 and "already belongs" in r.text
    assert await db.fetchval("SELECT count(*) FROM admins WHERE lower(email) = $1", other_tenant.email.lower()) == 1
    assert await db.fetchval("SELECT tenant_id FROM admins WHERE lower(email) = $1",
                             other_tenant.email.lower()) == other_tenant.id
    console.cookies.clear()
