"""The simulator's sign-in rules as pure functions: where a sign-in link may point (PAP-4.6-02),
how a device_code poll's answer is read (RFC 8628 §3.5), and what is redacted from a form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from frontdoor_console.simulator.exchange import REDACTED, redact_form
from frontdoor_console.simulator.sign_in import _host_allowed, judge_poll
from frontdoor_console.simulator.step import Step
from frontdoor_core.outbound import FetchResult

ISSUER = "https://issuer.frontdoor.test/acme"


def answer(status: int, body: dict[str, Any]) -> FetchResult:
    return FetchResult(final_url=f"{ISSUER}/oauth/token", status=status, headers={}, body=json.dumps(body).encode(),
                       redirect_chain=(f"{ISSUER}/oauth/token",), elapsed=0.01)


@pytest.mark.parametrize(("link", "allowed"), [
    ("https://issuer.frontdoor.test/acme/device", True),
    ("https://login.issuer.frontdoor.test/device", True),  # a subdomain of the issuer's host
    ("https://shop.example.com/device", True),  # a poppy_domain
    ("https://www.shop.example.com/device?user_code=ABCD", True),
    ("https://evilissuer.frontdoor.test/device", False),  # not a subdomain, only a suffix
    ("https://shop.example.com.evil.test/device", False),
    ("https://elsewhere.example/device", False),
    ("not a url", False),
])
def test_a_sign_in_link_is_shown_only_on_the_issuer_or_its_domains(link: str, allowed: bool) -> None:
    assert _host_allowed(link, ISSUER, ["shop.example.com"]) is allowed


def test_pending_and_slow_down_wait_granted_goes_on_and_the_rest_are_findings() -> None:
    step = Step(key="signin", title="t")
    assert judge_poll(step, answer(400, {"error": "authorization_pending"})).pending
    slow = judge_poll(step, answer(400, {"error": "slow_down"}))
    assert slow.pending and slow.slow_down and step.ok is None and not step.findings
    granted = judge_poll(step, answer(200, {"access_token": "st", "refresh_token": "at", "signed_in": True}))
    assert granted.granted is not None and granted.granted["refresh_token"] == "at"
    for error in ("access_denied", "expired_token", "invalid_grant"):
        step = Step(key="signin", title="t")
        over = judge_poll(step, answer(400, {"error": error}))
        assert not over.pending and over.granted is None and step.ok is False
        assert [f.code for f in step.findings] == [error] and step.findings[0].doc.startswith("sign-in.md#")


def test_a_shown_form_redacts_every_sign_in_secret() -> None:
    shown = redact_form({"grant_type": "authorization_code", "code": "c0de", "code_verifier": "v3rifier",
                         "device_code": "d3vice", "refresh_token": "r3fresh", "redirect_uri": "https://x/cb"}, [])
    for secret in ("c0de", "v3rifier", "d3vice", "r3fresh"):
        assert secret not in shown
    assert shown.count(REDACTED) == 4 and "redirect_uri=https://x/cb" in shown
