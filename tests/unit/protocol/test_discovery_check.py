"""check_discovery_document: poppy.json as an agent reads it (PAP §3, §3.1, §3.3, §6, §8)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from frontdoor_protocol import Finding, Severity, check_discovery_document, has_errors

from .pap_fixtures import conformance_cases, load_fixture


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(load_fixture("discovery-valid.json"))
    return doc


def _codes(findings: list[Finding], severity: Severity | None = None) -> list[str]:
    return [f.code for f in findings if severity is None or f.severity is severity]


def _only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, findings
    return matching[0]


def test_fixture_document_has_no_findings() -> None:
    """The peer SDK's example discovery document is clean, served by its own domain."""
    assert check_discovery_document(_doc(), "example.com") == []


@pytest.mark.parametrize("case", conformance_cases("protocol", "discovery_document"), ids=lambda case: case["id"])
def test_peer_suite_discovery_document_cases(case: dict[str, Any]) -> None:
    """PAP-3.1-01, PAP-3.3-04, PAP-6-02, PAP-8-01, PAP-3-05: the suite's valid/invalid verdicts hold."""
    # The peer suite is the 0.2 agent's view: a 1.0 document is a version it does not speak.
    findings = check_discovery_document(case["input"], case["input"]["organization"]["domain"], versions=("0.2",))
    assert has_errors(findings) is not case["expect"]["valid"], findings


def test_pap_3_1_02_domain_must_be_the_serving_host() -> None:
    """PAP-3.1-02: a document served by a provider's host cannot name the company's domain."""
    finding = _only(check_discovery_document(_doc(), "host.provider.example"), "domain_mismatch")
    assert finding.severity is Severity.ERROR
    assert finding.requirement == "PAP-3.1-02"
    assert finding.pointer == "/organization/domain"
    assert "host.provider.example" in finding.message


def test_pap_3_1_02_www_is_a_different_host() -> None:
    """PAP-3.1-02: www. is not stripped; the hint says so."""
    finding = _only(check_discovery_document(_doc(), "www.example.com"), "domain_mismatch")
    assert "www." in finding.hint


def test_pap_3_1_02_case_is_ignored() -> None:
    """PAP-3.1-02: domains compare ignoring case."""
    doc = _doc()
    doc["organization"]["domain"] = "Example.COM"
    assert check_discovery_document(doc, "EXAMPLE.com") == []


@pytest.mark.parametrize(
    ("member", "value", "requirement"),
    [
        ("agent", {"protocols": [{"type": "poppy", "endpoint": "https://api.example.com/c"}]}, "PAP-4.3-01"),
        ("apis", [{"type": "openapi", "url": "https://api.example.com/o.json", "description": "Orders"}], "PAP-6-03"),
        ("feedback", {"endpoint": "https://api.example.com/poppy/feedback"}, "PAP-8-01"),
        ("web", {"browser_session_endpoint": "https://example.com/poppy/browser"}, "PAP-5-08"),
    ],
)
def test_auth_required_when_a_session_is_needed(member: str, value: object, requirement: str) -> None:
    """PAP §3.1: auth is required whenever agent, apis, web.browser_session_endpoint or feedback is present."""
    doc = {"protocol_version": "0.2", "organization": {"name": "Example", "domain": "example.com"}, member: value}
    finding = _only(check_discovery_document(doc, "example.com"), "auth_missing")
    assert finding.requirement == requirement
    assert finding.severity is Severity.ERROR


def test_web_without_browser_sessions_needs_no_auth() -> None:
    """PAP §3.1: a website alone needs no issuer."""
    doc = {"protocol_version": "0.2", "organization": {"name": "Example", "domain": "example.com"}, "web": {}}
    assert check_discovery_document(doc, "example.com") == []


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        (("auth", "issuer"), "/auth/issuer"),
        (("auth", "mediated", "endpoint"), "/auth/mediated/endpoint"),
        (("agent", "protocols", 0, "endpoint"), "/agent/protocols/0/endpoint"),
        (("apis", 1, "url"), "/apis/1/url"),
        (("feedback", "endpoint"), "/feedback/endpoint"),
        (("extensions", "operations", "endpoint"), "/extensions/operations/endpoint"),
    ],
)
def test_pap_3_05_every_url_is_https(path: tuple[str | int, ...], pointer: str) -> None:
    """PAP-3-05, PAP-3-06: an http URL anywhere in the document is an error at its pointer."""
    doc = _doc()
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = target[path[-1]].replace("https://", "http://")
    finding = _only(check_discovery_document(doc, "example.com"), "not_https")
    assert finding.pointer == pointer
    assert finding.requirement == "PAP-3-05"


def test_pap_3_05_third_party_extension_urls_are_https() -> None:
    """PAP-3-05: URLs in extensions are https too; the pointer escapes '/' in the name (RFC 6901)."""
    doc = _doc()
    doc["extensions"]["example.org/gift-wrap"] = {"version": "2", "callback": "http://example.org/cb"}
    finding = _only(check_discovery_document(doc, "example.com"), "not_https")
    assert finding.pointer == "/extensions/example.org~1gift-wrap/callback"


def test_pap_3_3_04_unknown_members_are_ignored() -> None:
    """PAP-3.3-04: unknown members at every level and unknown sign-in types raise nothing."""
    doc = _doc()
    doc["support_hours"] = "9-17"
    doc["organization"]["logo"] = "https://example.com/logo.png"
    doc["auth"]["passkey"] = {"scopes": ["poppy:read"]}
    doc["auth"]["direct"]["future"] = True
    doc["apis"][0]["tags"] = ["orders"]
    doc["agent"]["protocols"].append({"type": "a2a", "endpoint": "https://api.example.com/a2a"})
    assert check_discovery_document(doc, "example.com") == []


def test_pap_6_01_unknown_api_type_is_only_a_warning() -> None:
    """PAP-6-01 (company MUST use openapi or mcp), PAP-6-02 (agents skip others): a warning, not an error."""
    doc = _doc()
    doc["apis"].append({"type": "graphql", "url": "https://api.example.com/graphql", "description": "Catalog"})
    finding = _only(check_discovery_document(doc, "example.com"), "unknown_api_type")
    assert finding.severity is Severity.WARNING
    assert finding.requirement == "PAP-6-01"
    assert finding.pointer == "/apis/2/type"


@pytest.mark.parametrize(
    ("version", "code"),
    [
        ("0.1", "unsupported_version"),
        ("0.3", "unsupported_version"),
        ("2.0", "unsupported_version"),
        ("0.2.1", "invalid_field"),
        (0.2, "invalid_field"),
    ],
)
def test_pap_3_1_01_version_must_be_supported_major_minor(version: object, code: str) -> None:
    """PAP-3.1-01: a document of an unsupported or malformed version is refused."""
    doc = _doc()
    doc["protocol_version"] = version
    finding = _only(check_discovery_document(doc, "example.com"), code)
    assert finding.requirement == "PAP-3.1-01" and finding.severity is Severity.ERROR


def test_pap_3_1_01_a_0_2_reader_refuses_a_1_0_document() -> None:
    """PAP-3.1-01, ADR 0004 §1: pre-1.0 minors are incompatible, so a 0.2-only reader refuses 1.0."""
    doc = _doc()
    doc["protocol_version"] = "1.0"
    assert check_discovery_document(doc, "example.com") == []
    finding = _only(check_discovery_document(doc, "example.com", versions=("0.2",)), "unsupported_version")
    assert finding.hint.endswith("publish one of: 0.2.")


def test_pap_3_1_01_missing_version() -> None:
    """PAP-3.1-01: protocol_version is required."""
    doc = _doc()
    del doc["protocol_version"]
    assert _only(check_discovery_document(doc, "example.com"), "missing_field").pointer == "/protocol_version"


@pytest.mark.parametrize("doc", [[], "poppy", None, 3])
def test_document_must_be_an_object(doc: object) -> None:
    """PAP §3.1: the document is a JSON object."""
    assert _codes(check_discovery_document(doc, "example.com")) == ["not_object"]


def test_organization_is_required() -> None:
    """PAP-3.1-02: without organization.domain an agent cannot tie the document to its host."""
    doc = _doc()
    del doc["organization"]
    assert "missing_field" in _codes(check_discovery_document(doc, "example.com"))


def test_pap_4_6_03_organization_name_required() -> None:
    """PAP-4.6-03: agents show organization.name, so it must be a non-empty string."""
    doc = _doc()
    doc["organization"]["name"] = " "
    assert _only(check_discovery_document(doc, "example.com"), "invalid_field").pointer == "/organization/name"


def test_something_must_be_offered() -> None:
    """PAP §3.1: a document with none of agent, apis or web offers agents nothing."""
    doc = {"protocol_version": "0.2", "organization": {"name": "Example", "domain": "example.com"}}
    assert _codes(check_discovery_document(doc, "example.com")) == ["nothing_offered"]


def test_pap_3_3_01_invalid_extension_name_is_a_warning() -> None:
    """PAP-3.3-01: a name that is neither plain nor domain-prefixed is ignored by agents."""
    doc = _doc()
    doc["extensions"]["Gift Wrap!"] = {"version": "1"}
    finding = _only(check_discovery_document(doc, "example.com"), "invalid_extension_name")
    assert finding.severity is Severity.WARNING and finding.requirement == "PAP-3.3-01"


def test_pap_3_3_02_other_operations_version_is_ignored_with_a_warning() -> None:
    """PAP-3.3-02: an Operations version agents of this profile do not speak is ignored."""
    doc = _doc()
    doc["extensions"]["operations"]["version"] = "2"
    finding = _only(check_discovery_document(doc, "example.com"), "unsupported_extension_version")
    assert finding.severity is Severity.WARNING


def test_ops_operations_extension_needs_an_endpoint() -> None:
    """OPS-2-01: the Operations extension is useless without its endpoint."""
    doc = _doc()
    del doc["extensions"]["operations"]["endpoint"]
    assert _only(check_discovery_document(doc, "example.com"), "missing_field").pointer == (
        "/extensions/operations/endpoint"
    )


def test_pap_4_4_03_scopes_are_scope_tokens() -> None:
    """PAP-4.4-03: sign-in scopes are OAuth scope-tokens."""
    doc = _doc()
    doc["auth"]["device"]["scopes"] = ["poppy:read", "not a token"]
    assert _only(check_discovery_document(doc, "example.com"), "invalid_field").pointer == "/auth/device/scopes"


def test_undescribed_custom_scope_is_a_warning() -> None:
    """PAP §4.4: a scope neither built in nor in custom_scopes cannot be explained to users."""
    doc = _doc()
    doc["auth"]["direct"]["scopes"].append("loyalty")
    finding = _only(check_discovery_document(doc, "example.com"), "undescribed_scope")
    assert finding.severity is Severity.WARNING and finding.pointer == "/auth/direct/scopes/3"


def test_pap_4_7_01_mediated_fields_need_secret_flags() -> None:
    """PAP-4.7-01: each Mediated Sign-In field says whether it is secret."""
    doc = _doc()
    del doc["auth"]["mediated"]["fields"][1]["secret"]
    assert _only(check_discovery_document(doc, "example.com"), "invalid_field").pointer == "/auth/mediated/fields"


def test_rfc8414_2_issuer_without_query() -> None:
    """RFC 8414 §2: an issuer identifier has no query component."""
    doc = _doc()
    doc["auth"]["issuer"] = "https://auth.example.com/?tenant=a"
    assert _only(check_discovery_document(doc, "example.com"), "invalid_field").requirement == "RFC 8414 §2"


def test_findings_never_echo_large_values() -> None:
    """GUIDE-secrets-01: a huge value from the document is cut to a short excerpt."""
    doc = _doc()
    doc["organization"]["domain"] = "a" * 60 + "." + "b" * 50 + ".example"
    doc["protocol_version"] = "9." + "9" * 100_000
    doc["apis"][0]["type"] = "x" * 100_000
    for finding in check_discovery_document(doc, "example.com"):
        assert len(finding.message) < 300 and len(finding.hint) < 400 and len(finding.pointer) < 100


def test_every_finding_is_complete() -> None:
    """Each finding has a snake_case code, a severity, a message, a hint and a requirement."""
    doc = {"protocol_version": "x", "organization": {}, "agent": {"protocols": []}, "apis": {}, "feedback": 1}
    findings = check_discovery_document(doc, "example.com")
    assert len(findings) >= 5
    for finding in findings:
        assert finding.code.islower() and " " not in finding.code
        assert finding.severity in (Severity.ERROR, Severity.WARNING)
        assert finding.message and finding.hint and finding.requirement
