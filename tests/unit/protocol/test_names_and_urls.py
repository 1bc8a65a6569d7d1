"""Domain names, HTTPS URLs and extension names (PAP-3.1-02, PAP-3-05, PAP-3.3-01)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import (
    ExtensionNameKind,
    UrlProblem,
    domains_equal,
    extension_name_kind,
    host_of,
    https_url_problem,
    is_domain_name,
    normalize_domain,
)

from .pap_fixtures import conformance_cases


def test_pap_3_1_02_domains_compare_ignoring_case_only() -> None:
    """PAP-3.1-02: case is ignored and nothing else is normalized."""
    assert domains_equal("Example.COM", "example.com")
    assert not domains_equal("www.example.com", "example.com")
    assert not domains_equal("example.com.", "example.com")


def test_pap_3_1_02_no_unicode_case_folding() -> None:
    """PAP-3.1-02: only ASCII folds; KELVIN SIGN lower-cases to 'k' in Python but is not 'k'."""
    assert "\u212a".lower() == "k"
    assert not domains_equal("\u212aite.example", "kite.example")


@pytest.mark.parametrize("name", ["example.com", "shop-a.example", "xn--bcher-kva.example", "a.b.c.d", "EXAMPLE.COM"])
def test_domain_names_accepted(name: str) -> None:
    """Host names in A-label form are domain names."""
    assert is_domain_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "localhost",
        "example.com.",
        "-bad.example",
        "a..b",
        "192.168.0.1",
        "https://example.com",
        "ex ample.com",
        "example.com:443",
        "b\u00fccher.example",
        "a" * 64 + ".example",
        None,
    ],
)
def test_domain_names_refused(name: object) -> None:
    """Single labels, trailing dots, IPs, URLs, ports and U-labels are not domain names here."""
    assert not is_domain_name(name)


def test_normalize_domain_lowers_ascii_only() -> None:
    """Stored form: ASCII lower case; non-ASCII is refused rather than folded."""
    assert normalize_domain("Shop-A.Example") == "shop-a.example"
    with pytest.raises(ValueError):
        normalize_domain("\u212aite.example")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://api.example.com/x?y=1", None),
        ("HTTPS://api.example.com", None),
        ("https://api.example.com:8443/", None),
        ("http://api.example.com/feedback", UrlProblem.NOT_HTTPS),
        ("ftp://example.com", UrlProblem.NOT_HTTPS),
        ("//example.com/x", UrlProblem.MALFORMED),
        ("https:///path", UrlProblem.MALFORMED),
        ("https://exa mple.com", UrlProblem.MALFORMED),
        ("https://example.com:99999/", UrlProblem.MALFORMED),
        ("https://user:pw@example.com/", UrlProblem.HAS_USERINFO),
        ("https://example.com/#top", UrlProblem.HAS_FRAGMENT),
        ("https://example.com/" + "a" * 3000, UrlProblem.TOO_LONG),
        (42, UrlProblem.NOT_STRING),
    ],
)
def test_pap_3_05_https_urls(url: object, problem: UrlProblem | None) -> None:
    """PAP-3-05: every URL is an https URL with a host, no credentials, no fragment."""
    assert https_url_problem(url) is problem


def test_host_of() -> None:
    """The host of a URL, lower-cased, without port."""
    assert host_of("https://Auth.Example.com:8443/x") == "auth.example.com"
    assert host_of("not a url") is None


def test_pap_3_3_01_peer_suite_extension_names() -> None:
    """PAP-3.3-01: the peer suite's plain, third-party and invalid names classify alike."""
    (case,) = conformance_cases("protocol", "extension_names")
    expected = case["expect"]
    by_kind = {kind: sorted(n for n in case["input"] if extension_name_kind(n) is kind) for kind in ExtensionNameKind}
    assert by_kind[ExtensionNameKind.PLAIN] == sorted(expected["plain"])
    assert by_kind[ExtensionNameKind.THIRD_PARTY] == sorted(expected["third_party"])
    assert by_kind[ExtensionNameKind.INVALID] == sorted(expected["invalid"])
