"""Checks the ``auth`` member of a ``poppy.json``: the issuer and its sign-in types.

Part of :func:`~frontdoor_protocol.check_discovery_document` (PAP §3.2, §4.4-§4.7).
"""

from __future__ import annotations

from frontdoor_protocol.finding import FindingCode, Findings, excerpt, json_pointer, json_type_name
from frontdoor_protocol.https_url import check_https_url
from frontdoor_protocol.scopes import BUILT_IN_SCOPES, is_scope_token

__all__ = ["check_auth"]

_C = FindingCode


def _check_scopes(value: object, pointer: str, findings: Findings, described: set[str]) -> None:
    if value is None:
        findings.warning(
            _C.MISSING_FIELD,
            pointer,
            "This sign-in type lists no scopes, so agents cannot request any.",
            "List the scopes it can grant, such as poppy:read.",
            "PAP-4.4-03",
        )
        return
    if not isinstance(value, list) or not all(is_scope_token(item) for item in value):
        findings.error(
            _C.INVALID_FIELD,
            pointer,
            "scopes must be an array of OAuth scope-tokens.",
            "Use strings of visible ASCII without spaces, quotes or backslashes.",
            "PAP-4.4-03",
        )
        return
    for index, scope in enumerate(value):
        if scope not in BUILT_IN_SCOPES and scope not in described:
            findings.warning(
                _C.UNDESCRIBED_SCOPE,
                f"{pointer}/{index}",
                f"Scope {excerpt(scope)} is neither built in nor described in auth.custom_scopes.",
                "Describe it in auth.custom_scopes so agents can tell users what it allows.",
                "PAP §4.4",
            )


def check_auth(auth: object, findings: Findings) -> None:
    """Check the ``auth`` member of a ``poppy.json`` (PAP §3.2, §4.4-§4.7).

    Unknown sign-in types and members are ignored (PAP-3.3-04).

    Args:
        auth: The member's value (not ``None``).
        findings: Where problems are added, with pointers under ``/auth``.
    """
    if not isinstance(auth, dict):
        findings.error(
            _C.INVALID_FIELD,
            "/auth",
            f"auth is {json_type_name(auth)}, not an object.",
            'Write "auth": {"issuer": ...}.',
            "PAP-3.2-03",
        )
        return
    issuer = auth.get("issuer")
    if issuer is None:
        findings.error(
            _C.MISSING_FIELD,
            "/auth/issuer",
            "auth.issuer is missing.",
            "Set it to the issuer identifier, exactly as its metadata's issuer.",
            "PAP-3.2-03",
        )
    elif check_https_url(findings, issuer, "/auth/issuer") and "?" in issuer:
        findings.error(
            _C.INVALID_FIELD,
            "/auth/issuer",
            "auth.issuer has a query component.",
            "An issuer identifier is an https URL without query or fragment.",
            "RFC 8414 §2",
        )
    described = _check_custom_scopes(auth.get("custom_scopes"), findings)
    for kind in ("direct", "device"):
        offer = auth.get(kind)
        if offer is None:
            continue
        if not isinstance(offer, dict):
            findings.error(
                _C.INVALID_FIELD, f"/auth/{kind}", f"auth.{kind} must be an object.", '{"scopes": [...]}', "PAP §4.4"
            )
            continue
        _check_scopes(offer.get("scopes"), f"/auth/{kind}/scopes", findings, described)
    mediated = auth.get("mediated")
    if mediated is not None:
        _check_mediated(mediated, findings, described)


def _check_custom_scopes(value: object, findings: Findings) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, dict):
        findings.error(
            _C.INVALID_FIELD,
            "/auth/custom_scopes",
            "auth.custom_scopes must map each scope to its description.",
            'Write {"addresses": "Manage saved addresses"}.',
            "PAP §4.4",
        )
        return set()
    described = set()
    for name, description in value.items():
        if not is_scope_token(name) or not isinstance(description, str) or not description.strip():
            findings.error(
                _C.INVALID_FIELD,
                json_pointer("auth", "custom_scopes", name),
                "Each custom scope must be a scope-token described by a non-empty string.",
                "Use a scope-token as the name and a sentence users understand as the value.",
                "PAP-4.4-03",
            )
        else:
            described.add(name)
    return described


def _check_mediated(mediated: object, findings: Findings, described: set[str]) -> None:
    if not isinstance(mediated, dict):
        findings.error(
            _C.INVALID_FIELD,
            "/auth/mediated",
            "auth.mediated must be an object.",
            "Give endpoint, fields and scopes.",
            "PAP §4.7",
        )
        return
    if mediated.get("endpoint") is None:
        findings.error(
            _C.MISSING_FIELD,
            "/auth/mediated/endpoint",
            "auth.mediated.endpoint is missing.",
            "Set the https URL credentials are posted to.",
            "PAP-4.7-05",
        )
    else:
        check_https_url(findings, mediated["endpoint"], "/auth/mediated/endpoint")
    fields = mediated.get("fields")
    if not isinstance(fields, list) or not fields or not all(_is_field(field) for field in fields):
        findings.error(
            _C.INVALID_FIELD if fields is not None else _C.MISSING_FIELD,
            "/auth/mediated/fields",
            "auth.mediated.fields must be a non-empty array of {name, label, secret}.",
            "Describe each credential field; mark passwords and codes secret: true.",
            "PAP-4.7-01",
        )
    _check_scopes(mediated.get("scopes"), "/auth/mediated/scopes", findings, described)


def _is_field(field: object) -> bool:
    return (
        isinstance(field, dict)
        and isinstance(field.get("name"), str)
        and bool(field["name"])
        and isinstance(field.get("label"), str)
        and bool(field["label"])
        and isinstance(field.get("secret"), bool)
    )
