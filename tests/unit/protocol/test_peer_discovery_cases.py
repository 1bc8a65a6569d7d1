"""The peer suite's discovery cases, replayed through the checks an agent applies (PAP §3.1, §3.2).

Each case is a set of canned HTTP responses. Redirects are followed here only to learn
which host finally served the document; the cases about transport limits (redirect count,
size, time, content type, unsafe redirect targets) belong to the fetcher, not to these
pure checks, and are not selected.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from frontdoor_protocol import Finding, check_discovery_document, check_metadata, has_errors, metadata_url

from .pap_fixtures import conformance_cases

# The peer suite's error names for what these checks find, and our finding codes.
_EXPECTED_CODE = {
    "organization_domain_mismatch": "domain_mismatch",
    "issuer_mismatch": "issuer_mismatch",
    "domain_not_authorized": "not_listed",
    "invalid_oauth_metadata": "es256_missing",
    "unsupported_protocol_version": "unsupported_version",
}
_CASES = [
    case
    for case in conformance_cases("protocol", "discovery") + conformance_cases("security", "discovery")
    if case["expect"].get("error", "") in _EXPECTED_CODE or "error" not in case["expect"]
]


def _fetch(responses: dict[str, Any], url: str) -> tuple[Any, str]:
    for _ in range(5):
        response = responses[url]
        if response["status"] in (301, 302, 303, 307, 308):
            url = response["headers"]["location"]
            continue
        host = urlsplit(url).hostname
        assert host is not None
        return response["json"], host
    raise AssertionError("redirect loop in fixture")


def _discover(case: dict[str, Any]) -> list[Finding]:
    responses = case["input"]["responses"]
    document, host = _fetch(responses, f"https://{case['input']['domain']}/.well-known/poppy.json")
    findings = check_discovery_document(document, host)
    if not has_errors(findings) and document.get("auth"):
        issuer = document["auth"]["issuer"]
        metadata, _ = _fetch(responses, metadata_url(issuer))
        findings += check_metadata(metadata, issuer, document["organization"]["domain"])
    return findings


def test_enough_peer_cases_selected() -> None:
    """The replay covers the suite's domain, issuer and version cases (a guard against an empty selection)."""
    assert len(_CASES) >= 12


@pytest.mark.parametrize("case", _CASES, ids=lambda case: case["id"])
def test_peer_discovery_case(case: dict[str, Any]) -> None:
    """PAP-3.1-01, PAP-3.1-02, PAP-3.2-03, PAP-3.2-04, PAP-3.2-07, PAP-3.2-10: the suite's verdict."""
    findings = _discover(case)
    expected = case["expect"].get("error")
    if expected is None:
        assert not has_errors(findings), findings
    else:
        assert _EXPECTED_CODE[expected] in [f.code for f in findings if f.is_error], findings
