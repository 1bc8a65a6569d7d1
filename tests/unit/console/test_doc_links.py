"""Every finding the scanner, the publish check and the agent simulator report links to a page
and anchor that exist in ``docs/``, and that section names the code.

Links are ``{FRONTDOOR_DOCS_BASE_URL}{page}#{anchor}``; the anchors are the ones a Markdown
renderer makes from the headings (GitHub's rules: lower case, punctuation dropped, spaces
to hyphens), so the link works wherever the docs are published.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from frontdoor_core.outbound import FetchErrorCode
from frontdoor_protocol.finding import FindingCode
from frontdoor_tenancy.scanner import SCANNER_CODES, doc_for

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
SIMULATOR = ROOT / "services/console/src/frontdoor_console/simulator"
PUBLISH_CHECK = ROOT / "libs/tenancy/src/frontdoor_tenancy/publish_check.py"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _slug(text: str) -> str:
    text = re.sub(r"`([^`]*)`", r"\1", text).strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def _sections(page: Path) -> dict[str, str]:
    """Each heading's anchor and its section's text (until the next heading at its level or above)."""
    lines = page.read_text().splitlines()
    heads = [(i, len(m.group(1)), _slug(m.group(2))) for i, line in enumerate(lines)
             if (m := _HEADING.match(line))]
    out: dict[str, str] = {}
    for n, (i, level, slug) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        key, k = slug, 1
        while key in out:  # repeated headings get -1, -2...
            key, k = f"{slug}-{k}", k + 1
        out[key] = "\n".join(lines[i:end])
    return out


def _section(doc: str) -> str:
    page, _, anchor = doc.partition("#")
    path = DOCS / page
    assert path.is_file(), f"{doc}: no docs/{page}"
    if not anchor:
        return path.read_text()
    sections = _sections(path)
    assert anchor in sections, f"{doc}: docs/{page} has no heading with the anchor #{anchor}"
    return sections[anchor]


def _publish_check_codes() -> set[str]:
    literal = set(re.findall(r'code="([a-z_]+)"', PUBLISH_CHECK.read_text()))
    return literal | {c.value for c in FindingCode} | {c.value for c in FetchErrorCode}


@pytest.mark.parametrize("code", sorted(SCANNER_CODES | _publish_check_codes()))
def test_every_scanner_and_publish_check_code_links_to_its_section(code: str) -> None:
    section = _section(doc_for(code))
    assert f"`{code}`" in section, f"{code}: not explained at {doc_for(code)}"


def test_the_simulators_own_links_resolve() -> None:
    docs = {d for f in SIMULATOR.glob("*.py") for d in re.findall(r'doc="([^"]+)"', f.read_text())}
    assert {"sdk.md#refusals", "sessions.md#mcp-servers-resource-tokens", "domains.md"} <= docs
    for doc in sorted(docs):
        _section(doc)
    for page in ("scanner.md",):  # the scanner page's "How the scanner works"
        _section(page)


def test_the_anchor_rules() -> None:
    assert _slug("### cache-disabled".lstrip("# ")) == "cache-disabled"
    assert _slug("MCP servers: resource tokens") == "mcp-servers-resource-tokens"
    assert _slug("`poppy.json`: the document you publish") == "poppyjson-the-document-you-publish"
    with pytest.raises(AssertionError):
        _section("scanner.md#no-such-heading")
    with pytest.raises(AssertionError):
        _section("no-such-page.md")
