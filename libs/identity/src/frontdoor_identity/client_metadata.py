"""A personal agent's Client ID Metadata Document and the rules it must meet (PAP §4.1).

The agent's ``client_id`` is the HTTPS URL of this document (PAP-4.1-01); the document
names that URL again as its ``client_id`` (PAP-4.1-02); its ``jwks_uri`` and every
``redirect_uris`` entry are HTTPS URLs on the same domain as the ``client_id``
(PAP-4.1-03). "Same domain" is the exact host, compared in its ASCII (IDNA) form
ignoring case: ``keys.agent.example`` is not ``agent.example`` (that is how the
protocol's reference reads PAP-4.1-03, and how §3 treats ``www.``). Ports are not
part of a domain and are not compared.

Unknown members are ignored (PAP-3.3-03), and so is a ``jwks`` member: keys are taken
only from the verified ``jwks_uri`` (GUIDE-jwt-03), never from the document.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import httpx
import msgspec
from frontdoor_core.outbound import is_loopback_host
from frontdoor_protocol import CLIENT_AUTH_METHOD, ExtensionNameKind, UrlProblem, extension_name_kind, https_url_problem

from frontdoor_identity.errors import InvalidClientMetadata, ResolutionReason
from frontdoor_identity.loopback_redirect import is_loopback_redirect

__all__ = [
    "MAX_CLIENT_NAME_LENGTH",
    "AgentExtension",
    "ClientMetadata",
    "check_client_id",
    "url_host",
    "validate_client_metadata",
]

MAX_CLIENT_NAME_LENGTH: Final = 200
"""Longest ``client_name`` accepted; it is shown to company admins."""

_EXTENSION_VERSION: Final = re.compile(r"[0-9]{1,9}")
_R = ResolutionReason


class AgentExtension(msgspec.Struct, frozen=True, kw_only=True):
    """One extension the agent lists as supported (PAP §3.3); other members are ignored."""

    version: str


class ClientMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """The validated members of a Client ID Metadata Document that Frontdoor uses.

    Attributes:
        client_id: The agent's identifier, the URL this document was fetched from.
        client_name: Its display name (1-200 printable characters).
        jwks_uri: Where its public signing keys are published, on the client_id's host.
        redirect_uris: Where sign-in may redirect (PAP-4.5-01 matches them exactly).
        logo_uri: An HTTPS logo for dashboards, if any.
        token_endpoint_auth_method: Always ``private_key_jwt``.
        auth_method_declared: Whether the document names ``token_endpoint_auth_method``
            (a PAP 1.0 sign-in needs it declared, [S §3]).
        loopback_redirect_uris: RFC 8252 §7.3 loopback IP literal redirect URIs
            (``http://127.0.0.1:{port}/…``, ``http://[::1]:{port}/…``), which only a PAP 1.0
            Direct Sign-In may use (`loopback_redirect`); 0.2 never matches them.
        extensions: Supported extensions by name (``operations``, ``example.org/x``),
            each with its version. Entries with an invalid name or no string version
            are dropped, as an unsupported extension is ignored (PAP-3.3-02).
    """

    client_id: str
    client_name: str
    jwks_uri: str
    redirect_uris: tuple[str, ...] = ()
    logo_uri: str | None = None
    token_endpoint_auth_method: str = CLIENT_AUTH_METHOD
    auth_method_declared: bool = False
    loopback_redirect_uris: tuple[str, ...] = ()
    extensions: Mapping[str, AgentExtension] = msgspec.field(default_factory=dict)

    def extension_version(self, name: str) -> str | None:
        """The version of extension ``name`` the agent supports, or None when it lists none."""
        entry = self.extensions.get(name)
        return entry.version if entry is not None else None


def _url_problem(value: object, *, allow_http_loopback: bool) -> UrlProblem | None:
    problem = https_url_problem(value)
    if (
        problem is UrlProblem.NOT_HTTPS
        and allow_http_loopback
        and isinstance(value, str)
        and value[:5].lower() == "http:"
        and is_loopback_host(url_host(value) or "")
    ):
        # Development only: plain http to this machine, otherwise the same rules.
        return https_url_problem("https" + value[4:])
    return problem


def url_host(url: str) -> str | None:
    """The URL's host in ASCII (IDNA) lower case, as it is resolved and connected to."""
    try:
        raw = httpx.URL(url).raw_host
    except httpx.InvalidURL:
        return None
    try:
        host = raw.decode("ascii").lower()
    except UnicodeDecodeError:
        return None
    return host.strip("[]") or None


def check_client_id(client_id: object, *, allow_http_loopback: bool = False) -> str:
    """Return ``client_id`` if it can name an agent: an HTTPS URL (PAP-4.1-01, PAP-3-05).

    Args:
        client_id: The value an assertion or request presented.
        allow_http_loopback: Development only: accept ``http://`` to a loopback host.

    Returns:
        ``client_id`` unchanged.

    Raises:
        InvalidClientMetadata: ``invalid_client_id`` (not a string, not HTTPS, over
            2048 characters, with credentials or a fragment).
    """
    if _url_problem(client_id, allow_http_loopback=allow_http_loopback) is not None or not isinstance(client_id, str):
        raise InvalidClientMetadata(_R.INVALID_CLIENT_ID, "client_id", requirement="PAP-4.1-01")
    if url_host(client_id) is None:
        raise InvalidClientMetadata(_R.INVALID_CLIENT_ID, "client_id", requirement="PAP-4.1-01")
    return client_id


def _refuse(reason: ResolutionReason, requirement: str) -> InvalidClientMetadata:
    return InvalidClientMetadata(reason, "client_metadata", requirement=requirement)


def _same_host_url(
    value: object,
    host: str,
    *,
    allow_http_loopback: bool,
    not_https: ResolutionReason,
    other_domain: ResolutionReason,
) -> str:
    if _url_problem(value, allow_http_loopback=allow_http_loopback) is not None or not isinstance(value, str):
        raise _refuse(not_https, "PAP-4.1-03")
    if url_host(value) != host:
        raise _refuse(other_domain, "PAP-4.1-03")
    return value


def _client_name(doc: Mapping[str, object]) -> str:
    if "client_name" not in doc:
        raise _refuse(_R.MISSING_FIELD, "PAP §4.1")
    name = doc["client_name"]
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_CLIENT_NAME_LENGTH or not name.isprintable():
        raise _refuse(_R.INVALID_FIELD, "PAP §4.1")
    return name


def _extensions(value: object) -> dict[str, AgentExtension]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _refuse(_R.INVALID_FIELD, "PAP §3.3")
    kept: dict[str, AgentExtension] = {}
    for name, entry in value.items():
        if extension_name_kind(name) is ExtensionNameKind.INVALID or not isinstance(entry, dict):
            continue
        version = entry.get("version")
        if isinstance(version, str) and _EXTENSION_VERSION.fullmatch(version):
            kept[name] = AgentExtension(version=version)
    return kept


def validate_client_metadata(doc: object, client_id_url: str, *, allow_http_loopback: bool) -> ClientMetadata:
    """Check a decoded metadata document fetched from ``client_id_url`` (PAP §4.1).

    Pure: the caller fetched ``doc`` from exactly ``client_id_url`` without redirects.

    Args:
        doc: The decoded JSON document.
        client_id_url: The URL it was fetched from: the client_id being resolved.
        allow_http_loopback: Development only: accept ``http://`` URLs to loopback hosts.

    Returns:
        The members Frontdoor uses.

    Raises:
        InvalidClientMetadata: With the first rule broken, in this order:
            ``invalid_client_id`` (PAP-4.1-01), ``not_object``, ``missing_field`` /
            ``invalid_field`` / ``client_id_mismatch`` for ``client_id`` (PAP-4.1-02),
            ``missing_field`` / ``invalid_field`` for ``client_name``,
            ``jwks_uri_not_https`` / ``jwks_uri_other_domain`` and
            ``redirect_uri_not_https`` / ``redirect_uri_other_domain`` (PAP-4.1-03),
            ``logo_uri_not_https`` (PAP-3-05), ``unsupported_auth_method``,
            ``invalid_field`` for a non-array ``redirect_uris`` or non-object ``extensions``.
    """
    check_client_id(client_id_url, allow_http_loopback=allow_http_loopback)
    host = url_host(client_id_url)
    assert host is not None  # check_client_id refused URLs without one
    if not isinstance(doc, dict):
        raise _refuse(_R.NOT_OBJECT, "PAP-4.1-01")
    if "client_id" not in doc:
        raise _refuse(_R.MISSING_FIELD, "PAP-4.1-02")
    if not isinstance(doc["client_id"], str):
        raise _refuse(_R.INVALID_FIELD, "PAP-4.1-02")
    if doc["client_id"] != client_id_url:  # character for character: no normalisation
        raise _refuse(_R.CLIENT_ID_MISMATCH, "PAP-4.1-02")
    name = _client_name(doc)
    if "jwks_uri" not in doc:
        raise _refuse(_R.MISSING_FIELD, "PAP-4.1-03")
    jwks_uri = _same_host_url(
        doc["jwks_uri"],
        host,
        allow_http_loopback=allow_http_loopback,
        not_https=_R.JWKS_URI_NOT_HTTPS,
        other_domain=_R.JWKS_URI_OTHER_DOMAIN,
    )
    raw_redirects = doc.get("redirect_uris", [])
    if not isinstance(raw_redirects, list):
        raise _refuse(_R.INVALID_FIELD, "PAP-4.1-03")
    redirect_uris: list[str] = []
    loopback: list[str] = []
    for uri in raw_redirects:
        try:
            redirect_uris.append(_same_host_url(
                uri,
                host,
                allow_http_loopback=allow_http_loopback,
                not_https=_R.REDIRECT_URI_NOT_HTTPS,
                other_domain=_R.REDIRECT_URI_OTHER_DOMAIN,
            ))
        except InvalidClientMetadata:
            if not is_loopback_redirect(uri):
                raise
            loopback.append(uri)  # RFC 8252 §7.3: for PAP 1.0 Direct Sign-In only
    logo = doc.get("logo_uri")
    if logo is not None and (
        _url_problem(logo, allow_http_loopback=allow_http_loopback) is not None or not isinstance(logo, str)
    ):
        raise _refuse(_R.LOGO_URI_NOT_HTTPS, "PAP-3-05")
    method = doc.get("token_endpoint_auth_method", CLIENT_AUTH_METHOD)
    if method != CLIENT_AUTH_METHOD:
        raise _refuse(_R.UNSUPPORTED_AUTH_METHOD, "PAP §4.1")
    return ClientMetadata(
        client_id=client_id_url,
        client_name=name,
        jwks_uri=jwks_uri,
        redirect_uris=tuple(redirect_uris),
        logo_uri=logo,
        auth_method_declared="token_endpoint_auth_method" in doc,
        loopback_redirect_uris=tuple(loopback),
        extensions=_extensions(doc.get("extensions")),
    )
