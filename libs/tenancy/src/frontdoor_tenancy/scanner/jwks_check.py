"""The issuer's JWKS as an agent's resource servers will read it: a set of public keys.

Frontdoor's issuers sign Session Tokens with ES256 (`frontdoor_protocol` metadata checks
require ``ES256``), so the set must hold at least one usable EC P-256 key with a ``kid``,
and never a private member (RFC 7517 §4, RFC 7518 §6.2.2: ``d``; §6.3.2 and §6.4 for the
RSA and symmetric ones).
"""

from __future__ import annotations

from typing import Any, Final

from ..publish_check import CheckFinding

__all__ = ["check_jwks"]

_PRIVATE: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_SOURCE: Final = "jwks"


def _finding(code: str, message: str, hint: str, pointer: str = "", requirement: str = "RFC 7517 §5") -> CheckFinding:
    return CheckFinding(code=code, severity="error", message=message, hint=hint, pointer=pointer,
                        requirement=requirement, source=_SOURCE)


def check_jwks(doc: Any) -> list[CheckFinding]:
    """Every problem of a decoded JWKS; none means it holds a usable ES256 verification key."""
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        return [_finding("jwks_invalid", "The JWKS is not an object with a keys array.",
                         "Serve the issuer's jwks_uri unchanged (Frontdoor publishes it for you).")]
    findings: list[CheckFinding] = []
    usable = 0
    for index, key in enumerate(doc["keys"]):
        pointer = f"/keys/{index}"
        if not isinstance(key, dict):
            findings.append(_finding("jwks_invalid", "A key is not a JSON object.", "Publish JWK objects only.", pointer))
            continue
        if _PRIVATE & set(key):
            findings.append(_finding("jwks_private_key", "A key in the JWKS carries private key material.",
                                     "Remove the key at once, rotate the signing key and publish public keys only.",
                                     pointer, "RFC 7517 §4"))
            continue
        if key.get("kty") == "EC" and key.get("crv") == "P-256" and isinstance(key.get("kid"), str) \
                and isinstance(key.get("x"), str) and isinstance(key.get("y"), str):
            usable += 1
    if not doc["keys"]:
        findings.append(_finding("jwks_empty", "The JWKS holds no key, so no token can be verified.",
                                 "Publish the issuer's signing keys (Frontdoor's jwks_uri does)."))
    elif usable == 0 and not findings:
        findings.append(_finding("jwks_no_es256_key", "The JWKS has no EC P-256 key with a kid.",
                                 "Publish the ES256 signing key with its kid.", requirement="RFC 7518 §6.2"))
    return findings
