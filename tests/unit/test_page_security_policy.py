"""The pages' Content-Security-Policy: which origin a form's redirect may reach, and nothing wider.

Browsers check the redirects that follow a form's POST against the ``form-action`` of the
page that sent it, so a page names the one origin its form's answer may redirect to
(`origin_source`); anything a CSP source cannot name exactly is left out, never widened.
"""

from __future__ import annotations

import pytest
from frontdoor_httpkit import SecurityHeadersMiddleware, content_security_policy, origin_source

DEFAULT = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
           "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


@pytest.mark.parametrize(("url", "source"), [
    ("https://shop.example/login", "https://shop.example"),
    ("HTTPS://Login.Shop.Example:443/signin", "https://login.shop.example"),  # default port dropped
    ("https://login.shop.example:8443/signin", "https://login.shop.example:8443"),
    ("http://127.0.0.1:8003/login", "http://127.0.0.1:8003"),
    ("http://localhost:80/cb?x=1#f", "http://localhost"),
    ("https://user:secret@agent.example/callback", "https://agent.example"),  # userinfo never copied
    ("https://bücher.example/cb", "https://xn--bcher-kva.example"),  # IDNA, as browsers compare
])
def test_the_source_is_the_exact_origin(url: str, source: str) -> None:
    assert origin_source(url) == source


@pytest.mark.parametrize("url", [
    "", "not a url", "/relative/path", "https:///no-host", "javascript:alert(1)", "data:text/html,hi",
    "ftp://files.example/", "com.example.agent:/callback",  # only http(s) origins
    "https://[::1]:8443/cb",  # an IPv6 literal has no CSP host-source
    "https://*.example/cb", "https://shop.example;/x", "https://shop_1.example/", "https://a%20b.example/",
    "https://shop.example:99999/",  # not a port
])
def test_what_a_source_cannot_name_exactly_is_none(url: str) -> None:
    assert origin_source(url) is None


def test_the_default_policy_allows_forms_to_post_only_to_the_page_itself() -> None:
    assert content_security_policy() == DEFAULT


def test_form_action_adds_the_given_origins_once_after_self() -> None:
    policy = content_security_policy(form_action=["https://shop.example", "http://127.0.0.1:8003",
                                                  "https://shop.example"])
    assert policy == DEFAULT.replace("form-action 'self'",
                                     "form-action 'self' https://shop.example http://127.0.0.1:8003")
    assert "frame-ancestors 'none'" in policy and "base-uri 'none'" in policy


@pytest.mark.parametrize("source", [
    "*", "https:", "http:", "'unsafe-inline'", "https://*.shop.example", "https://shop.example/login",
    "https://shop.example; script-src *", "https://shop.example https://evil.example", " https://shop.example",
    "https://shop.example,https://evil.example", "data:",
])
def test_anything_but_an_origin_source_is_refused(source: str) -> None:
    with pytest.raises(ValueError, match="origin sources"):
        content_security_policy(form_action=[source])


async def test_the_middleware_keeps_a_pages_own_policy_and_adds_the_rest() -> None:
    own = content_security_policy(form_action=["https://shop.example"]).encode()

    async def app(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200,  # type: ignore[operator]
                    "headers": [(b"Content-Security-Policy", own)]})

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await SecurityHeadersMiddleware(app)({"type": "http"}, None, send)  # type: ignore[arg-type]
    headers = sent[0]["headers"]
    assert isinstance(headers, list)
    policies = [v for k, v in headers if k.lower() == b"content-security-policy"]
    assert policies == [own]
    assert (b"x-frame-options", b"DENY") in headers and (b"x-content-type-options", b"nosniff") in headers
