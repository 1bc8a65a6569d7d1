"""A tenant's issuer configuration: sign-in types, scopes, the APIs it lists, lifetimes.

Validation refuses any configuration that would make the generated ``poppy.json`` or
the issuer metadata invalid (PAP §3): enabled sign-in types need scopes, every scope is
built in or declared, listed API URLs are HTTPS.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_protocol.login_handoff import login_public_key

__all__ = [
    "BUILTIN_SCOPES",
    "ApiEntry",
    "IssuerSettings",
    "LoginConnection",
    "MediatedField",
    "MediatedSettings",
    "ProtocolSettings",
    "SignInType",
    "StoredIssuerSettings",
    "default_settings",
    "get_settings",
    "insert_settings",
    "update_settings",
    "validate_settings",
]

BUILTIN_SCOPES: dict[str, str] = {
    "poppy:read": "Read your account information",
    "poppy:write": "Make changes to your account on your behalf",
}
# RFC 6749 §3.3 scope-token characters, further limited to what reads well on a consent page.
_SCOPE_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._\-/]{0,63}$")
_ENDPOINT_ID = re.compile(r"whe_[A-Za-z0-9_-]{1,60}")
MIN_SESSION_LIFETIME_S = 300
MAX_SESSION_LIFETIME_S = 24 * 3600


class SignInType(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One sign-in type (``direct`` or ``device``) and the scopes it may grant."""

    enabled: bool = False
    scopes: list[str] = msgspec.field(default_factory=list)


class MediatedField(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One credential field agents collect for Mediated Sign-In (PAP §4.7)."""

    name: str
    label: str
    secret: bool = False


class MediatedSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Mediated Sign-In (PAP §4.7): Frontdoor relays the fields to the company's ``relay_url``.

    Off by default. Secret field values are never stored or logged; they go only to
    ``relay_url`` inside a short-lived request signed with the tenant's issuer key.
    """

    enabled: bool = False
    scopes: list[str] = msgspec.field(default_factory=list)
    relay_url: str | None = None
    fields: list[MediatedField] = msgspec.field(default_factory=list)
    attempts_per_user_per_minute: int = 5
    attempts_per_agent_per_minute: int = 60


class ApiEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An API the company lists in ``poppy.json`` (PAP §3 ``apis``)."""

    type: Literal["openapi", "mcp"]
    url: str
    description: str = ""
    supports_dpop: bool = True


class LoginConnection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where the company's users sign in: the signed handoff (ADR 0002) or its OpenID Provider.

    Attributes:
        type: ``handoff`` (the company's login page answers with a signed response,
            docs/login-handoff.md) or ``oidc`` (the company's identity provider signs its
            users in through the OpenID Connect authorization code flow, docs/sign-in.md).
        url: ``handoff``: the company's login page; Frontdoor sends the browser to
            ``url?request=<JWT>``. HTTPS (loopback ``http`` in development), no query or
            fragment. Empty for ``oidc``.
        jwks_uri: ``handoff``: the company's JWKS on the login page's host, fetched and cached briefly.
        public_jwk: ``handoff``: or the one public EC P-256 key (with its ``kid``) the responses
            are signed with. Exactly one of ``jwks_uri`` and ``public_jwk``.
        issuer: ``oidc``: the IdP's issuer identifier; its metadata is discovered at
            ``{issuer}/.well-known/openid-configuration``.
        client_id: ``oidc``: Frontdoor's client ID at the IdP.
        client_secret: ``oidc``: write-only. Given on a write, it is stored KEK-encrypted
            apart from the settings (`frontdoor_tenancy.oidc_connection`) and always reads
            back as null; omitted on a write, the stored secret is kept.
        token_endpoint_auth_method: ``oidc``: ``client_secret_basic``, ``client_secret_post``
            or ``private_key_jwt`` (a client assertion signed with the tenant's client key,
            `frontdoor_tenancy.oidc_client_key`, published at ``{issuer}/oidc/jwks.json``).
        account_claim: ``oidc``: which claim is the company's account ID: ``sub`` (the
            default) or ``email`` (taken only when ``email_verified`` is true).
        userinfo: ``oidc``: also read the claims at the IdP's userinfo endpoint (for IdPs
            that put ``email`` there only).
        backchannel_logout: ``oidc``: accept the IdP's Back-Channel Logout tokens at
            ``{issuer}/oidc/backchannel-logout`` (needs ``account_claim: sub``).
    """

    type: Literal["handoff", "oidc"] = "handoff"
    url: str = ""
    jwks_uri: str | None = None
    public_jwk: dict[str, Any] | None = None
    issuer: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "private_key_jwt"] = (
        "client_secret_basic")
    account_claim: Literal["sub", "email"] = "sub"
    userinfo: bool = False
    backchannel_logout: bool = False


ProfileVersion = Literal["0.2", "1.0"]


class ProtocolSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which PAP profiles the issuer serves, and which one ``poppy.json`` names (ADR 0004 §1).

    Attributes:
        served: What the issuer and the sdk accept: ``0.2`` (the jwt-bearer Session grant
            and Session Tokens) and/or ``1.0`` (``Poppy-Session`` headers with RFC 9068
            access tokens). Settings stored before 1.0 existed decode as ``["0.2"]``, so
            nothing changes under an existing tenant until an admin opts in.
        published: The ``protocol_version`` of the generated ``poppy.json``; one of
            ``served``. A document names exactly one version.
        join_callback_url: Where Frontdoor's hosted 1.0 browser join sends the joined
            browser (ADR 0004 §8): the company's page that mounts the sdk's join callback,
            ``https://`` on one of the tenant's verified domains (checked at each join;
            loopback ``http://`` in development). Until it is set, a 1.0 ``poppy.json``
            advertises no ``web.browser_session_endpoint`` [S §6].
    """

    served: list[ProfileVersion] = msgspec.field(default_factory=lambda: ["0.2"])
    published: ProfileVersion = "0.2"
    join_callback_url: str | None = None

    def serves(self, version: str) -> bool:
        """Whether the issuer accepts requests of ``version``."""
        return version in self.served


class HostedConversations(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Frontdoor hosts the company agent's conversation endpoint (PAP §7) at ``{ledger}/{slug}/conversations``.

    Attributes:
        enabled: ``poppy.json`` lists the hosted endpoint in ``agent.protocols``; the
            company's agent answers through ``conversation.message.created`` webhooks and the
            ledger API. Exclusive with ``conversation_endpoint`` (the company's own).
        retention_days: Events older than this are forgotten (their cursors answer
            ``cursor_expired``); 1 to 3650.
        relay_endpoint_id: The relay mode: Frontdoor POSTs each agent message to this webhook
            endpoint of the tenant (its URL under the webhook rules, signed with its secret)
            and records the company's answer; None: the webhook mode.
    """

    enabled: bool = False
    retention_days: int = 30
    relay_endpoint_id: str | None = None


class IssuerSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What ``GET/PUT /api/v1/issuer`` reads and writes."""

    organization_name: str = ""
    direct: SignInType = msgspec.field(default_factory=SignInType)
    device: SignInType = msgspec.field(default_factory=SignInType)
    mediated: MediatedSettings = msgspec.field(default_factory=MediatedSettings)
    custom_scopes: dict[str, str] = msgspec.field(default_factory=dict)
    apis: list[ApiEntry] = msgspec.field(default_factory=list)
    website: bool = True
    conversation_endpoint: str | None = None
    # Frontdoor hosts the conversation endpoint instead (PAP §7, docs/conversations.md).
    conversations: HostedConversations = msgspec.field(default_factory=HostedConversations)
    # The company's page where agents join their own browser to a Session (PAP §5).
    browser_session_endpoint: str | None = None
    session_lifetime_s: int = 3600
    dpop_nonce_required: bool = False
    sessions_per_agent_per_minute: int = 60
    token_requests_per_network_per_minute: int = 600
    agent_rate_overrides: dict[str, int] = msgspec.field(default_factory=dict)
    # A refresh returns a new Account Token and retires the old one (PAP §4.8); reusing a
    # retired token then revokes its whole sign-in.
    rotate_account_tokens: bool = True
    login: LoginConnection | None = None
    protocol: ProtocolSettings = msgspec.field(default_factory=ProtocolSettings)

    def all_scopes(self) -> dict[str, str]:
        """Built-in and custom scopes with descriptions."""
        return {**BUILTIN_SCOPES, **self.custom_scopes}

    def enabled_scopes(self) -> list[str]:
        """Scopes some enabled sign-in type can grant, in a stable order."""
        out: list[str] = []
        for t in (self.direct, self.device, self.mediated):
            if t.enabled:
                out.extend(s for s in t.scopes if s not in out)
        return out


class StoredIssuerSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Settings with their optimistic-concurrency version."""

    settings: IssuerSettings
    version: int
    updated_at: datetime


def default_settings(organization_name: str, *, session_lifetime_s: int = 3600) -> IssuerSettings:
    """A new tenant's settings: signed-out Sessions only, nothing listed yet.

    No sign-in type is on until the tenant turns one on (and until Frontdoor serves its
    endpoints), so the metadata never advertises an endpoint that does not answer. New
    tenants serve both profiles and publish 0.2 (ADR 0004 §1).
    """
    return IssuerSettings(organization_name=organization_name, session_lifetime_s=session_lifetime_s,
                          protocol=ProtocolSettings(served=["0.2", "1.0"], published="0.2"))


def _url_ok(url: str, *, dev: bool) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.username or parts.password or parts.fragment:
        return False
    if parts.scheme == "https" and parts.hostname:
        return True
    return dev and parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost", "::1"}


def validate_settings(s: IssuerSettings, *, dev: bool = False) -> IssuerSettings:
    """Return ``s`` normalised, or raise `Invalid` listing every problem by field."""
    errors: dict[str, str] = {}
    name = s.organization_name.strip()
    if not name or len(name) > 120:
        errors["organization_name"] = "must be 1 to 120 characters"
    for scope, desc in s.custom_scopes.items():
        if scope in BUILTIN_SCOPES or scope.startswith("poppy:"):
            errors[f"custom_scopes.{scope[:64]}"] = "the poppy: prefix is reserved for built-in scopes"
        elif not _SCOPE_TOKEN.match(scope):
            errors[f"custom_scopes.{scope[:64]}"] = "scope names are 1-64 of A-Z a-z 0-9 : . _ - /"
        elif not desc.strip() or len(desc) > 200:
            errors[f"custom_scopes.{scope}"] = "needs a description of 1 to 200 characters"
    if len(s.custom_scopes) > 50:
        errors["custom_scopes"] = "at most 50 custom scopes"
    known = s.all_scopes()
    for tname, t in (("direct", s.direct), ("device", s.device)):
        if len(set(t.scopes)) != len(t.scopes):
            errors[f"{tname}.scopes"] = "lists a scope twice"
        unknown = [x for x in t.scopes if x not in known]
        if unknown:
            errors[f"{tname}.scopes"] = "unknown scope; declare it in custom_scopes first"
        if t.enabled and not t.scopes:
            errors[f"{tname}.scopes"] = "an enabled sign-in type needs at least one scope"
    errors.update(_mediated_errors(s.mediated, known, dev=dev))
    seen_urls: set[str] = set()
    for i, api in enumerate(s.apis):
        if not _url_ok(api.url, dev=dev):
            errors[f"apis[{i}].url"] = "must be an https:// URL without credentials or fragment"
        if api.url in seen_urls:
            errors[f"apis[{i}].url"] = "listed twice"
        seen_urls.add(api.url)
        if not api.description.strip() or len(api.description) > 300:
            errors[f"apis[{i}].description"] = "1 to 300 characters: agents show it to people"
    if len(s.apis) > 20:
        errors["apis"] = "at most 20 APIs"
    if s.conversation_endpoint is not None and not _url_ok(s.conversation_endpoint, dev=dev):
        errors["conversation_endpoint"] = "must be an https:// URL without credentials or fragment"
    if s.browser_session_endpoint is not None and not _url_ok(s.browser_session_endpoint, dev=dev):
        errors["browser_session_endpoint"] = "must be an https:// URL without credentials or fragment"
    if s.conversations.enabled and s.conversation_endpoint is not None:
        errors["conversations.enabled"] = "hosted conversations replace conversation_endpoint: set one of them"
    if not 1 <= s.conversations.retention_days <= 3650:
        errors["conversations.retention_days"] = "must be between 1 and 3650"
    relay = s.conversations.relay_endpoint_id
    if relay is not None and not _ENDPOINT_ID.fullmatch(relay):
        errors["conversations.relay_endpoint_id"] = "must be a webhook endpoint ID (whe_...)"
    if not s.apis and not s.website and s.conversation_endpoint is None and not s.conversations.enabled:
        errors["website"] = "poppy.json must offer something: list an API or keep website on (PAP §3.1)"
    if not 1 <= s.sessions_per_agent_per_minute <= 100_000:
        errors["sessions_per_agent_per_minute"] = "must be between 1 and 100000"
    if not 1 <= s.token_requests_per_network_per_minute <= 1_000_000:
        errors["token_requests_per_network_per_minute"] = "must be between 1 and 1000000"
    if len(s.agent_rate_overrides) > 1000 or any(not 1 <= v <= 100_000 for v in s.agent_rate_overrides.values()):
        errors["agent_rate_overrides"] = "at most 1000 agents, each 1 to 100000 Sessions per minute"
    if not MIN_SESSION_LIFETIME_S <= s.session_lifetime_s <= MAX_SESSION_LIFETIME_S:
        errors["session_lifetime_s"] = "must be between 300 (5 minutes) and 86400 (24 hours)"
    if s.login is not None:
        errors.update(_login_errors(s.login, dev=dev))
    errors.update(_protocol_errors(s.protocol, dev=dev))
    if errors:
        raise Invalid("invalid_settings", "The issuer settings are not valid.", fields=errors)
    served = sorted(set(s.protocol.served))  # "0.2" < "1.0": a stable order, each once
    return msgspec.structs.replace(s, organization_name=name,
                                   protocol=msgspec.structs.replace(s.protocol, served=served))


def _protocol_errors(p: ProtocolSettings, *, dev: bool = False) -> dict[str, str]:
    """Problems of the ``protocol`` setting (ADR 0004 §1, §8)."""
    if p.join_callback_url is not None and (
            not _url_ok(p.join_callback_url, dev=dev) or urlsplit(p.join_callback_url).query
            or len(p.join_callback_url) > 2048):
        return {"protocol.join_callback_url": "must be an https:// URL without credentials, query or fragment"}
    if not p.served:
        return {"protocol.served": "serve at least one profile"}
    if p.published not in p.served:
        return {"protocol.published": "the published version must be one the issuer serves"}
    return {}


_FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def _mediated_errors(m: MediatedSettings, known: dict[str, str], *, dev: bool) -> dict[str, str]:
    """Problems of the ``mediated`` setting by field (PAP §4.7)."""
    errors: dict[str, str] = {}
    if len(set(m.scopes)) != len(m.scopes):
        errors["mediated.scopes"] = "lists a scope twice"
    if any(x not in known for x in m.scopes):
        errors["mediated.scopes"] = "unknown scope; declare it in custom_scopes first"
    names = [f.name for f in m.fields]
    if len(m.fields) > 10 or len(set(names)) != len(names) or any(not _FIELD_NAME.match(n) for n in names):
        errors["mediated.fields"] = "at most 10 fields, unique names of 1-64 of A-Z a-z 0-9 _"
    if any(not f.label.strip() or len(f.label) > 80 for f in m.fields):
        errors["mediated.fields"] = "every field needs a label of 1 to 80 characters"
    if m.relay_url is not None and (not _url_ok(m.relay_url, dev=dev) or urlsplit(m.relay_url).query):
        errors["mediated.relay_url"] = "must be an https:// URL without credentials, query or fragment"
    if not 1 <= m.attempts_per_user_per_minute <= 1000 or not 1 <= m.attempts_per_agent_per_minute <= 100_000:
        errors["mediated.attempts"] = "attempt limits must be between 1 and 1000 (user), 100000 (agent)"
    if m.enabled:
        if not m.scopes:
            errors["mediated.scopes"] = "an enabled sign-in type needs at least one scope"
        if not m.fields:
            errors["mediated.fields"] = "an enabled Mediated Sign-In needs at least one field"
        if m.relay_url is None:
            errors["mediated.relay_url"] = "an enabled Mediated Sign-In needs the company's relay_url"
    return errors


def _login_errors(login: LoginConnection, *, dev: bool) -> dict[str, str]:
    """Problems of the ``login`` setting by field (ADR 0002, "The login handoff"; OIDC)."""
    if login.type == "oidc":
        return _oidc_errors(login, dev=dev)
    errors: dict[str, str] = {}
    if login.issuer is not None or login.client_id is not None or login.client_secret is not None:
        errors["login.type"] = "issuer, client_id and client_secret belong to an oidc connection"
    if login.backchannel_logout:
        errors["login.backchannel_logout"] = "belongs to an oidc connection"
    url_ok = _url_ok(login.url, dev=dev) and not urlsplit(login.url).query
    if not url_ok:
        errors["login.url"] = "must be an https:// URL without credentials, query or fragment"
    if (login.jwks_uri is None) == (login.public_jwk is None):
        errors["login"] = "set exactly one of jwks_uri and public_jwk"
    if login.jwks_uri is not None:
        if not _url_ok(login.jwks_uri, dev=dev):
            errors["login.jwks_uri"] = "must be an https:// URL without credentials or fragment"
        elif url_ok and urlsplit(login.jwks_uri).hostname != urlsplit(login.url).hostname:
            errors["login.jwks_uri"] = "must be on the login page's host"
    if login.public_jwk is not None:
        try:
            login_public_key(login.public_jwk)
        except ValueError as exc:
            errors["login.public_jwk"] = str(exc)
    return errors


_VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]{1,255}$")


def _oidc_errors(login: LoginConnection, *, dev: bool) -> dict[str, str]:
    """Problems of an ``oidc`` login connection by field (OpenID Connect Discovery 1.0 §2-§4)."""
    errors: dict[str, str] = {}
    if login.url or login.jwks_uri is not None or login.public_jwk is not None:
        errors["login.type"] = "url, jwks_uri and public_jwk belong to a handoff connection"
    issuer = login.issuer or ""
    # An issuer is https, without query or fragment (Discovery §2); the ID token's iss must equal it.
    if not _url_ok(issuer, dev=dev) or urlsplit(issuer).query or len(issuer) > 2048 or "?" in issuer:
        errors["login.issuer"] = "must be the IdP's https:// issuer URL, without credentials, query or fragment"
    if login.client_id is None or not _VISIBLE_ASCII.match(login.client_id):
        errors["login.client_id"] = "must be 1 to 255 visible ASCII characters"
    secret = login.client_secret
    if secret is not None and not re.fullmatch(r"[\x20-\x7e]{8,1024}", secret):
        errors["login.client_secret"] = "must be 8 to 1024 printable ASCII characters"
    if login.backchannel_logout and login.account_claim != "sub":
        errors["login.backchannel_logout"] = "needs account_claim sub: a logout token names the user by sub"
    return errors


def _storable(settings: IssuerSettings) -> Any:
    # The OIDC client secret lives KEK-encrypted in its own table (oidc_connection), never here.
    if settings.login is not None and settings.login.client_secret is not None:
        raise ValueError("store the login client secret with oidc_connection.store_login_secret first")
    return msgspec.to_builtins(settings)


async def insert_settings(conn: asyncpg.Connection, tenant_id: str, settings: IssuerSettings) -> None:
    """Store a new tenant's first settings."""
    await conn.execute(
        "INSERT INTO issuer_settings (tenant_id, settings) VALUES ($1, $2)",
        tenant_id, _storable(settings),
    )


async def get_settings(conn: asyncpg.Connection, tenant_id: str) -> StoredIssuerSettings:
    """The tenant's settings; `NotFound` for an unknown tenant."""
    row = await conn.fetchrow(
        "SELECT settings, version, updated_at FROM issuer_settings WHERE tenant_id = $1", tenant_id
    )
    if row is None:
        raise NotFound("tenant_not_found", "No such tenant.")
    return StoredIssuerSettings(
        settings=msgspec.convert(row["settings"], IssuerSettings),
        version=row["version"],
        updated_at=row["updated_at"],
    )


async def update_settings(
    conn: asyncpg.Connection, tenant_id: str, settings: IssuerSettings, *, if_version: int | None = None
) -> StoredIssuerSettings:
    """Replace the settings (compare-and-set on ``if_version`` when given).

    Raises:
        ValueError: ``login.client_secret`` is set (store it with
            `frontdoor_tenancy.oidc_connection.store_login_secret`, which clears it).
        Conflict: The version changed.
    """
    row = await conn.fetchrow(
        """
        UPDATE issuer_settings
           SET settings = $2, version = version + 1, updated_at = now()
         WHERE tenant_id = $1 AND ($3::int IS NULL OR version = $3)
        RETURNING version, updated_at
        """,
        tenant_id, _storable(settings), if_version,
    )
    if row is None:
        raise Conflict("version_conflict", "The settings changed since you read them; reload and retry.")
    return StoredIssuerSettings(settings=settings, version=row["version"], updated_at=row["updated_at"])
