"""normalize_domain and challenge_name: the canonical form, and every refusal with its code."""

import pytest
from frontdoor_tenancy.domains import (
    MAX_DOMAIN_LENGTH,
    InvalidDomain,
    InvalidDomainCode,
    challenge_name,
    is_public_suffix,
    normalize_domain,
)

Code = InvalidDomainCode


def _domain_of_length(length: int) -> str:
    """A valid name of exactly ``length`` characters, in labels of at most 63, ending in .com."""
    labels: list[str] = []
    remaining = length - len(".com")
    while remaining > 0:
        size = min(63, remaining)
        if remaining - size == 1:  # leave room for a label plus its dot
            size -= 2
        labels.append("a" * size)
        remaining -= size + 1
    name = ".".join(labels) + ".com"
    assert len(name) == length
    return name


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("example.com", "example.com"),
        ("  Example.COM  ", "example.com"),
        ("example.com.", "example.com"),
        ("Bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.example", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("XN--BCHER-KVA.Example", "xn--bcher-kva.example"),
        ("faß.de", "xn--fa-hia.de"),  # IDNA 2008, non-transitional: ß is kept
        ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
        ("ＥＸＡＭＰＬＥ．com", "example.com"),  # width folding and a fullwidth dot
        ("例え。テスト", "xn--r8jz45g.xn--zckzah"),  # ideographic full stop
        ("example.co.uk", "example.co.uk"),
        ("a.b.example.co.uk", "a.b.example.co.uk"),
        ("foo.github.io", "foo.github.io"),
        ("city.kawasaki.jp", "city.kawasaki.jp"),  # exception rule !city.kawasaki.jp
        ("a-b.example", "a-b.example"),
        ("xn--p1ai.example", "xn--p1ai.example"),
        ("a.xn--p1ai", "a.xn--p1ai"),
        ("123.example.com", "123.example.com"),  # numeric labels are fine, except the last
        ("www.example.localhost.com", "www.example.localhost.com"),
    ],
)
def test_accepts_and_normalizes(raw: str, expected: str) -> None:
    assert normalize_domain(raw) == expected
    assert normalize_domain(expected) == expected  # idempotent on its own output


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("", Code.EMPTY),
        ("   ", Code.EMPTY),
        (".", Code.EMPTY),
        ("1.2.3.4", Code.IP_ADDRESS),
        ("1.2.3.4.", Code.IP_ADDRESS),
        ("127.1", Code.IP_ADDRESS),
        ("0x7f.0.0.1", Code.IP_ADDRESS),
        ("１２７.０.０.１", Code.IP_ADDRESS),  # fullwidth digits map to an IPv4 address
        ("example.123", Code.IP_ADDRESS),
        ("::1", Code.IP_ADDRESS),
        ("2001:db8::1", Code.IP_ADDRESS),
        ("fe80::1%eth0", Code.IP_ADDRESS),
        ("[::1]", Code.IP_ADDRESS),
        ("[2001:db8::1]:443", Code.IP_ADDRESS),
        ("1.2.3.4:80", Code.IP_ADDRESS),
        ("[example.com]", Code.INVALID_CHARACTERS),
        ("localhost", Code.LOCALHOST),
        ("LOCALHOST.", Code.LOCALHOST),
        ("app.localhost", Code.LOCALHOST),
        ("co.uk", Code.PUBLIC_SUFFIX),
        ("github.io", Code.PUBLIC_SUFFIX),  # private section
        ("blogspot.com", Code.PUBLIC_SUFFIX),  # private section
        ("公司.cn", Code.PUBLIC_SUFFIX),  # IDN suffix, matched in A-label form
        ("foo.kawasaki.jp", Code.PUBLIC_SUFFIX),  # wildcard rule *.kawasaki.jp
        ("com", Code.SINGLE_LABEL),
        ("intranet", Code.SINGLE_LABEL),
        ("xn--p1ai", Code.SINGLE_LABEL),
        ("a.b:443", Code.HAS_PORT),
        ("example.com:", Code.HAS_PORT),
        ("https://example.com", Code.HAS_SCHEME),
        ("HTTP://example.com/path", Code.HAS_SCHEME),
        ("ftp://user@example.com:21/x", Code.HAS_SCHEME),
        ("user@example.com", Code.HAS_USERINFO),
        ("user:pw@example.com", Code.HAS_USERINFO),
        ("x.com/path", Code.HAS_PATH),
        ("x.com/", Code.HAS_PATH),
        ("x.com\\path", Code.HAS_PATH),
        ("//x.com", Code.HAS_PATH),
        ("x.com?q=1", Code.HAS_QUERY),
        ("x.com#top", Code.HAS_FRAGMENT),
        ("*.x.com", Code.WILDCARD),
        ("*", Code.WILDCARD),
        ("a*.x.com", Code.WILDCARD),
        ("exa mple.com", Code.WHITESPACE),
        ("example.com\tx", Code.WHITESPACE),
        ("exam\u3000ple.com", Code.WHITESPACE),
        ("exa_mple.com", Code.INVALID_CHARACTERS),
        ("_dmarc.example.com", Code.INVALID_CHARACTERS),
        ("ex!ample.com", Code.INVALID_CHARACTERS),
        ("exam\x00ple.com", Code.INVALID_CHARACTERS),
        ("-example.com", Code.INVALID_HYPHEN),
        ("example-.com", Code.INVALID_HYPHEN),
        ("ab--cd.com", Code.INVALID_HYPHEN),
        ("xn--.com", Code.INVALID_HYPHEN),
        ("üb--er.com", Code.INVALID_HYPHEN),
        ("xn--zz.com", Code.INVALID_IDNA),  # not valid Punycode
        ("xn--bcher-kvb.example", Code.INVALID_IDNA),  # decodes, but not to a valid U-label
        ("ab\u200dc.com", Code.INVALID_IDNA),  # ZERO WIDTH JOINER outside its allowed context
        ("a..b.com", Code.EMPTY_LABEL),
        (".example.com", Code.EMPTY_LABEL),
        ("example.com..", Code.EMPTY_LABEL),
        ("a" * 64 + ".com", Code.LABEL_TOO_LONG),
        ("ü" * 58 + ".com", Code.LABEL_TOO_LONG),  # 58 characters, but a 64-character A-label
        (_domain_of_length(MAX_DOMAIN_LENGTH + 1), Code.TOO_LONG),
        (_domain_of_length(253), Code.TOO_LONG),
        (_domain_of_length(254), Code.TOO_LONG),
        ("a." * 600 + "com", Code.TOO_LONG),
    ],
)
def test_refuses_with_stable_code(raw: str, code: InvalidDomainCode) -> None:
    with pytest.raises(InvalidDomain) as caught:
        normalize_domain(raw)
    assert caught.value.code == code
    assert caught.value.message
    assert str(caught.value) == caught.value.message


def test_label_and_domain_length_limits_are_inclusive() -> None:
    assert normalize_domain("a" * 63 + ".com") == "a" * 63 + ".com"
    assert len(normalize_domain("ü" * 57 + ".com").split(".")[0]) == 63
    longest = _domain_of_length(MAX_DOMAIN_LENGTH)
    assert normalize_domain(longest) == longest


def test_longest_domain_still_has_a_valid_challenge_name() -> None:
    assert MAX_DOMAIN_LENGTH == 232
    name = challenge_name(normalize_domain(_domain_of_length(MAX_DOMAIN_LENGTH)))
    assert len(name) == 253


def test_refusal_messages_do_not_echo_the_input() -> None:
    marker = "zzsecretmarkerzz"
    for raw in (f"https://{marker}.com", f"{marker}.com/p", f"{marker}!.com", f"*.{marker}.com", f"{marker}:1"):
        with pytest.raises(InvalidDomain) as caught:
            normalize_domain(raw)
        assert marker not in str(caught.value)
        assert marker not in repr(caught.value)


def test_invalid_domain_is_a_value_error_with_code_and_message() -> None:
    error = InvalidDomain(Code.EMPTY, "Enter a domain name.")
    assert isinstance(error, ValueError)
    assert error.code == "empty"
    assert repr(error) == "InvalidDomain('empty', 'Enter a domain name.')"


def test_is_public_suffix_covers_both_sections() -> None:
    assert is_public_suffix("com")
    assert is_public_suffix("co.uk")
    assert is_public_suffix("github.io")
    assert not is_public_suffix("example.com")
    assert not is_public_suffix("example.github.io")


def test_challenge_name() -> None:
    assert challenge_name("example.com") == "_frontdoor-challenge.example.com"
    assert challenge_name(normalize_domain("Bücher.example")) == "_frontdoor-challenge.xn--bcher-kva.example"


@pytest.mark.parametrize(
    "domain",
    ["", "Example.com", "example.com.", ".example.com", " example.com", "bücher.example", _domain_of_length(233)],
)
def test_challenge_name_refuses_non_canonical_input(domain: str) -> None:
    with pytest.raises(ValueError, match="normalize_domain"):
        challenge_name(domain)
