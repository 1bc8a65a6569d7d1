"""Whether a discovery document's HTTP caching headers let agents cache it sensibly.

Agents SHOULD cache ``poppy.json`` and the issuer metadata as their caching headers say
(PAP-3-04, PAP-3.2-05), within bounds such as a minute and a day (GUIDE-fetch-04). No
usable header, or ``no-store``, makes every agent fetch on every use; a lifetime longer
than a day delays a changed issuer or key. Warnings only: agents still work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from ..publish_check import CheckFinding

__all__ = ["MAX_LIFETIME_S", "MIN_LIFETIME_S", "check_caching"]

MIN_LIFETIME_S: Final = 60
MAX_LIFETIME_S: Final = 86_400
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,12})\"?\s*(?:,|$)", re.IGNORECASE)


def check_caching(headers: Mapping[str, str], source: str) -> list[CheckFinding]:
    """The caching findings of one fetched document's response headers (lower-case names)."""
    control = headers.get("cache-control", "")
    directives = {part.split("=", 1)[0].strip().lower() for part in control.split(",") if part.strip()}
    requirement = "PAP-3-04" if source == "poppy.json" else "PAP-3.2-05"
    if "no-store" in directives or "no-cache" in directives:
        return [CheckFinding(code="cache_disabled", severity="warning", source=source, requirement=requirement,
                             message="The response forbids caching (no-store or no-cache), so agents fetch it every time.",
                             hint="Send Cache-Control: public, max-age=300 (anything from a minute to a day).")]
    match = _MAX_AGE.search(control)
    if match is None:
        if "expires" in headers:
            return []
        return [CheckFinding(code="cache_headers_missing", severity="warning", source=source, requirement=requirement,
                             message="The response has no Cache-Control max-age (nor Expires), so agents guess how long to keep it.",
                             hint="Send Cache-Control: public, max-age=300 (anything from a minute to a day).")]
    age = int(match.group(1))
    if age < MIN_LIFETIME_S:
        return [CheckFinding(code="cache_too_short", severity="warning", source=source, requirement="GUIDE-fetch-04",
                             message=f"max-age is {age} s; agents will fetch it again almost every time.",
                             hint="Use a max-age of at least 60 seconds.")]
    if age > MAX_LIFETIME_S:
        return [CheckFinding(code="cache_too_long", severity="warning", source=source, requirement="GUIDE-fetch-04",
                             message=f"max-age is {age} s; a change would take over a day to reach agents.",
                             hint="Use a max-age of at most 86400 seconds (a day).")]
    return []
