"""An invitation token is a bearer value in the link's path: neither the 500 log of a crash
while accepting it nor any span may carry it (they name the route template)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from frontdoor_tenancy import team
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.console.test_team import _invite


async def test_a_crash_while_accepting_an_invite_logs_no_token(
        console: AsyncTestClient[Any], tenant: TenantHandle, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    csrf = await sign_in(console, tenant.email)
    token = await _invite(console, csrf, f"{unique('crash-')}@example.com", "viewer")
    console.cookies.clear()

    async def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the database went away")

    with capture_spans() as spans, capture_logs() as buf:
        page = await console.get(f"/invite/{token}")
        assert page.status_code == 200
        form_csrf = re.search(r'name="_csrf_token" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
        monkeypatch.setattr(team, "accept_invite", boom)
        r = await console.post(f"/invite/{token}", data={"password": STRONG_PASSWORD, "_csrf_token": form_csrf})
        monkeypatch.undo()
    assert r.status_code == 500
    assert token not in r.text
    logged = buf.getvalue()
    assert "unhandled_exception" in logged and "the database went away" in logged  # the crash was logged
    assert "/invite/{token}" in logged  # by its route template
    assert token not in logged
    span_text = spans.text()
    assert "POST /invite/{token}" in span_text and "GET /invite/{token}" in span_text
    assert token not in span_text
    captured = capfd.readouterr()
    assert token not in captured.out + captured.err
