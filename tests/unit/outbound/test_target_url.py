"""URL validation before any request: scheme, host shape, credentials, IP literals."""

from __future__ import annotations

import pytest
from frontdoor_core.outbound import AddressRules, FetchError, FetchErrorCode, OutboundPolicy, check_target

RULES = AddressRules(OutboundPolicy())


def _code(url: str, *, redirect: bool = False, dev: bool = False) -> FetchErrorCode:
    rules = AddressRules(OutboundPolicy(allow_http_loopback=dev)) if dev else RULES
    with pytest.raises(FetchError) as caught:
        check_target(url, rules, allow_http_loopback=dev, redirect=redirect)
    return caught.value.code


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pw@agent.example/a.json",  # userinfo
        "https://user@agent.example/a.json",
        "https:///a.json",  # no host
        "https://",
        "ftp://agent.example/a.json",  # weird schemes
        "file:///etc/passwd",
        "gopher://agent.example/",
        "javascript:alert(1)",
        "agent.example/a.json",  # no scheme
        "https://agent .example/",  # whitespace
        "https://agent.example/\r\nX: y",
        "https://agent.example\\@evil.example/",  # backslash parsing differentials
        "https://agent.example./a.json",  # trailing dot
        "https://a%2eb/",  # percent-encoded host
        "https://134744072/",  # shorthand forms of a public address (8.8.8.8) the resolver would accept
        "https://0x8.0x8.0x8.0x8/",
        "https://8.8.8.8./",
        "https://0x08080808/",
        "https://[2001:4860:4860::8888%25eth0]/",  # zone identifier
        "https://agent.example/" + "a" * 2048,  # too long
    ],
)
def test_bad_urls(url: str) -> None:
    assert _code(url) == FetchErrorCode.BAD_URL


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/",
        "https://10.0.0.1/",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[64:ff9b::a00:1]/",
        "https://0.0.0.0/",
        # every spelling of a non-public address a browser or resolver would accept
        "https://127.1/",
        "http://127.1/",
        "https://0x7f.0.0.1/",
        "https://0x7f000001/",
        "https://2130706433/",
        "https://017700000001/",
        "https://0177.0.0.1/",
        "https://127.0.0.1./",
        "https://%31%32%37.0.0.1/",
        "https://１２７.０.０.１/",  # fullwidth digits and dot
        "https://127。0。0。1/",  # ideographic full stop
        "https://[::ffff:7f00:1]/",
        "https://[fe80::1%25eth0]/",
        "https://10.1/",
        "https://0/",
        "https://localhost/",
        "https://LOCALHOST./",
        "https://api.localhost/",
        "https://user:pw@127.1/",
    ],
)
def test_non_public_ip_literals_are_blocked(url: str) -> None:
    assert _code(url) == FetchErrorCode.BLOCKED_ADDRESS


def test_plain_http_is_not_https_or_redirect_not_https() -> None:
    assert _code("http://agent.example/a.json") == FetchErrorCode.NOT_HTTPS
    assert _code("http://agent.example/a.json", redirect=True) == FetchErrorCode.REDIRECT_NOT_HTTPS


def test_development_mode_allows_http_only_to_loopback_hosts() -> None:
    dev = AddressRules(OutboundPolicy(allow_http_loopback=True))
    for url in ("http://localhost:8000/a.json", "http://127.0.0.1:8000/a", "http://[::1]/a"):
        assert check_target(url, dev, allow_http_loopback=True, redirect=False).scheme == "http"
    assert _code("http://agent.example/a.json", dev=True) == FetchErrorCode.NOT_HTTPS
    # a private address is refused for what it is, http or not
    assert _code("http://10.0.0.1/a.json", dev=True) == FetchErrorCode.BLOCKED_ADDRESS


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://agent.example/a.json", "https://agent.example/a.json"),
        ("https://Agent.Example:8443/a.json?x=1#frag", "https://agent.example:8443/a.json?x=1"),
        ("https://8.8.8.8/jwks", "https://8.8.8.8/jwks"),
        ("https://[2001:4860:4860::8888]/jwks", "https://[2001:4860:4860::8888]/jwks"),
        ("https://bücher.example/", "https://xn--bcher-kva.example/"),
        ("https://_acme.agent.example/", "https://_acme.agent.example/"),
    ],
)
def test_good_urls_are_normalised(url: str, expected: str) -> None:
    assert str(check_target(url, RULES, allow_http_loopback=False, redirect=False)) == expected


def test_allowlisted_literal_passes() -> None:
    rules = AddressRules(OutboundPolicy(allowlist=("127.0.0.1/32",)))
    assert check_target("https://127.0.0.1:9/x", rules, allow_http_loopback=False, redirect=False).port == 9
