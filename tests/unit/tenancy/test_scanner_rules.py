"""The scanner's pure rules: caching headers (PAP-3-04, PAP-3.2-05, GUIDE-fetch-04), the JWKS, the score."""

from __future__ import annotations

import pytest
from frontdoor_tenancy.publish_check import CheckFinding
from frontdoor_tenancy.scanner import ScanFinding, check_caching, check_jwks, doc_for, score_of

GOOD_KEY = {"kty": "EC", "crv": "P-256", "kid": "k1", "x": "xx", "y": "yy", "alg": "ES256", "use": "sig"}


@pytest.mark.parametrize(("headers", "code"), [
    ({"cache-control": "public, max-age=300"}, None),
    ({"cache-control": "max-age=60"}, None),
    ({"cache-control": "max-age=86400"}, None),
    ({"expires": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
    ({}, "cache_headers_missing"),
    ({"cache-control": "public"}, "cache_headers_missing"),
    ({"cache-control": "no-store"}, "cache_disabled"),
    ({"cache-control": "max-age=300, no-cache"}, "cache_disabled"),
    ({"cache-control": "max-age=5"}, "cache_too_short"),
    ({"cache-control": "max-age=31536000"}, "cache_too_long"),
    ({"cache-control": "s-maxage=300"}, "cache_headers_missing"),
])
def test_caching_headers(headers: dict[str, str], code: str | None) -> None:
    found = check_caching(headers, "poppy.json")
    assert [f.code for f in found] == ([code] if code else [])
    assert all(f.severity == "warning" and f.hint for f in found)


def test_caching_cites_the_document_rule() -> None:
    assert check_caching({}, "poppy.json")[0].requirement == "PAP-3-04"
    assert check_caching({}, "issuer metadata")[0].requirement == "PAP-3.2-05"


@pytest.mark.parametrize(("doc", "codes"), [
    ({"keys": [GOOD_KEY]}, []),
    ({"keys": [{"kty": "RSA", "kid": "r", "n": "n", "e": "AQAB"}, GOOD_KEY]}, []),
    ({"keys": []}, ["jwks_empty"]),
    ({"keys": [{"kty": "RSA", "kid": "r", "n": "n", "e": "AQAB"}]}, ["jwks_no_es256_key"]),
    ({"keys": [dict(GOOD_KEY, d="private")]}, ["jwks_private_key"]),
    ({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, ["jwks_private_key"]),
    ({"keys": "nope"}, ["jwks_invalid"]),
    ([GOOD_KEY], ["jwks_invalid"]),
    ({"keys": [1, GOOD_KEY]}, ["jwks_invalid"]),
])
def test_jwks(doc: object, codes: list[str]) -> None:
    assert [f.code for f in check_jwks(doc)] == codes


def _f(code: str, severity: str) -> ScanFinding:
    return ScanFinding.of(CheckFinding(code=code, severity=severity, message="m", hint="h"))


def test_score_and_doc_links() -> None:
    assert score_of([]) == 100
    assert score_of([_f("not_listed", "error"), _f("cache_disabled", "warning"), _f("not_checked", "info")]) == 75
    assert score_of([_f("x", "error")] * 6) == 0
    assert doc_for("not_listed") == "poppy-json.md#publish-check-findings"
    assert doc_for("cache_too_long") == "scanner.md#cache-too-long"
