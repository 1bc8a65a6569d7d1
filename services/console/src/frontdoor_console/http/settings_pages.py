"""The issuer settings page: the PAP profiles served and published, sign-in types and scopes,
custom scopes, Session lifetime, the login connection, DPoP nonces, rate limits; and
signing-key rotation, and the rotation of an OpenID Connect connection's ``private_key_jwt``
client key (`frontdoor_tenancy.oidc_client_key`).

Saving replaces the settings through the same validation as ``PUT /api/v1/issuer``,
compare-and-set on the version the form was rendered from (someone else's change in
between is a conflict, not a silent overwrite). Rotation asks for confirmation.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_sessions.oidc_login import (
    TEST_FLOW_PREFIX,
    CredentialsVerdict,
    OidcFailure,
    OidcLoginDenied,
    OidcLoginFailed,
    check_client_credentials,
    finish_oidc_login,
    start_oidc_login,
)
from frontdoor_sessions.oidc_provider import ProviderProblem, ProviderUnavailable, check_provider
from frontdoor_tenancy import audit, issuer_settings, oidc_client_key, oidc_connection, signing_keys
from frontdoor_tenancy.issuer_settings import IssuerSettings, LoginConnection, ProtocolSettings, SignInType
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import Parameter
from litestar.response import Redirect, Template

from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["routes"]

_NOTICES = {
    "saved": "Settings saved. The issuer metadata and poppy.json reflect them now.",
    "rotated": "New signing key published. It signs after the lead time; the old one stays published meanwhile.",
    "rotated_now": "New signing key signs now; every other key left the JWKS.",
    "login_ok": "Connection works: the IdP's discovery document and keys were fetched and checked, and its token "
                "endpoint accepted the client credentials.",
    "client_key_rotated": "New client key published at /oidc/jwks.json. It signs client assertions after the lead "
                          "time; the current key keeps signing until then and stays published until it expires.",
    "client_key_rotated_now": "New client key signs now; the old one left /oidc/jwks.json.",
}
_MAX_FORM_VALUES = 400
_PROVIDER_PROBLEMS = {
    ProviderProblem.UNREACHABLE: "discovery failed: {issuer}/.well-known/openid-configuration did not answer with "
                                 "JSON. Check the issuer URL (it is the IdP's issuer, not its login page)",
    ProviderProblem.NOT_METADATA: "the discovery document is not OpenID Provider metadata",
    ProviderProblem.ISSUER_MISMATCH: "the discovery document names another issuer: enter it exactly as the IdP "
                                     "writes it (a trailing slash counts)",
    ProviderProblem.INSECURE_ENDPOINT: "the IdP lists an endpoint that is not https://",
    ProviderProblem.NO_PKCE: "the IdP does not support PKCE S256",
    ProviderProblem.NO_USABLE_ALGORITHM: "the IdP signs ID tokens with no public-key algorithm (RS256, ES256...)",
    ProviderProblem.KEYS_UNAVAILABLE: "the IdP's JWKS could not be fetched or holds no public signing key",
}


async def _provider_error(ctx: Any, tenant_id: str, login: LoginConnection | None) -> dict[str, str]:
    """``{"login.issuer": why}`` when an oidc connection's IdP cannot be used, else nothing."""
    if login is None or login.type != "oidc" or login.issuer is None:
        return {}
    try:
        await check_provider(login.issuer, tenant_id=tenant_id, fetcher=ctx.fetcher, redis=ctx.redis)
    except ProviderUnavailable as exc:
        return {"login.issuer": _PROVIDER_PROBLEMS[exc.problem].format(issuer=login.issuer.rstrip("/"))}
    return {}


def _int(form: dict[str, list[str]], name: str, errors: dict[str, str]) -> int:
    raw = (form.get(name) or [""])[0].strip()
    if not raw.isdigit() or len(raw) > 9:
        errors[name] = "must be a whole number"
        return 0
    return int(raw)


def _text(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0].strip()


def _custom_scopes(raw: str, errors: dict[str, str]) -> dict[str, str]:
    """``scope: description`` per line (a scope may itself contain ``:``, as in ``orders:read``)."""
    out: dict[str, str] = {}
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, desc = line.partition(": ")
        if not sep or not name.strip():
            errors["custom_scopes"] = f"line {n}: write 'scope: description'"
            continue
        out[name.strip()] = desc.strip()
    return out


def settings_from_form(current: IssuerSettings, form: dict[str, list[str]]) -> IssuerSettings:
    """The settings the form describes, on top of what the form does not show (APIs, mediated...)."""
    errors: dict[str, str] = {}
    custom = _custom_scopes(_text(form, "custom_scopes"), errors)
    login_url = _text(form, "login_url")
    login: LoginConnection | None = current.login
    if _text(form, "login_type") == "oidc":
        auth = _text(form, "oidc_auth_method")
        claim = _text(form, "oidc_account_claim")
        login = LoginConnection(
            type="oidc", issuer=_text(form, "oidc_issuer") or None, client_id=_text(form, "oidc_client_id") or None,
            client_secret=(form.get("oidc_client_secret") or [""])[0] or None,  # empty: keep the stored one
            token_endpoint_auth_method="client_secret_post" if auth == "client_secret_post"
            else "private_key_jwt" if auth == "private_key_jwt" else "client_secret_basic",
            account_claim="email" if claim == "email" else "sub", userinfo="oidc_userinfo" in form,
            backchannel_logout="oidc_backchannel_logout" in form)
    elif login_url:
        jwks = _text(form, "login_jwks_uri") or None
        keep_jwk = current.login.public_jwk if current.login and not jwks else None
        login = LoginConnection(url=login_url, jwks_uri=jwks, public_jwk=keep_jwk)
    else:
        login = None
    protocol = current.protocol
    if "protocol_form" in form:  # the fieldset was on the page (an unchecked box sends nothing)
        served = [v for v in ("0.2", "1.0") if v in form.get("protocol_served", [])]
        published = _text(form, "protocol_published")
        if published not in ("0.2", "1.0"):
            errors["protocol.published"] = "choose 0.2 or 1.0"
            published = current.protocol.published
        protocol = ProtocolSettings(served=served, published=published)  # type: ignore[arg-type]
    new = msgspec.structs.replace(
        current,
        organization_name=_text(form, "organization_name"),
        direct=SignInType(enabled="direct_enabled" in form, scopes=list(dict.fromkeys(form.get("direct_scopes", [])))),
        device=SignInType(enabled="device_enabled" in form, scopes=list(dict.fromkeys(form.get("device_scopes", [])))),
        custom_scopes=custom,
        session_lifetime_s=_int(form, "session_lifetime_s", errors),
        dpop_nonce_required="dpop_nonce_required" in form,
        sessions_per_agent_per_minute=_int(form, "sessions_per_agent_per_minute", errors),
        token_requests_per_network_per_minute=_int(form, "token_requests_per_network_per_minute", errors),
        login=login,
        protocol=protocol,
    )
    if errors:
        raise Invalid("invalid_settings", "The issuer settings are not valid.", fields=errors)
    return new


class KeyView(msgspec.Struct, frozen=True, kw_only=True):
    kid: str
    created_at: datetime
    activates_at: datetime
    retired_at: datetime | None


async def _page(console: Console, state: State, *, settings: IssuerSettings | None = None, version: int | None = None,
                errors: dict[str, str] | None = None, error: str | None = None, notice: str | None = None,
                status_code: int = 200) -> Template:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        stored = await issuer_settings.get_settings(conn, console.tenant.id)
        keys = [KeyView(**dict(r)) for r in await conn.fetch(
            "SELECT kid, created_at, activates_at, retired_at FROM signing_keys WHERE tenant_id = $1"
            " ORDER BY created_at DESC", console.tenant.id)]
        published = {k["kid"] for k in (await signing_keys.jwks(conn, console.tenant.id, ctx.now()))["keys"]}
        secret_set = await oidc_connection.has_client_secret(conn, console.tenant.id)
        client_keys = await oidc_client_key.client_key_states(conn, console.tenant.id, now=ctx.now())
    shown = settings or stored.settings
    return console.page(
        "settings.html", nav="settings", s=shown, version=version or stored.version, updated_at=stored.updated_at,
        scopes=shown.all_scopes(), custom_text="\n".join(f"{k}: {v}" for k, v in shown.custom_scopes.items()),
        keys=keys, published=published, now=ctx.now(), issuer=ctx.issuer_url(console.tenant.slug),
        errors=errors or {}, error=error, notice=notice, status_code=status_code, secret_set=secret_set,
        client_keys=client_keys,
    )


@get("/settings")
async def settings_page(console: Console, state: State,
                        notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _page(console, state, notice=_NOTICES.get(notice or ""))


@post("/settings")
async def settings_save(console: Console, state: State, request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    raw = await request.form()
    form: dict[str, list[str]] = {}
    for key, value in list(raw.multi_items())[:_MAX_FORM_VALUES]:
        if isinstance(value, str):
            form.setdefault(key, []).append(value)
    version_text = _text(form, "version")
    version = int(version_text) if version_text.isdigit() and len(version_text) < 10 else None
    async with ctx.pool.acquire() as conn:
        current = (await issuer_settings.get_settings(conn, console.tenant.id)).settings
    try:
        wanted = settings_from_form(current, form)
    except Invalid as exc:
        return await _page(console, state, errors=exc.fields, error=exc.detail, status_code=422)
    try:
        clean = issuer_settings.validate_settings(wanted, dev=ctx.settings.is_dev)
        problem = await _provider_error(ctx, console.tenant.id, clean.login)
        if problem:  # a wrong issuer is said now, not at a user's first sign-in
            raise Invalid("invalid_settings", "The identity provider cannot be used.", fields=problem)
        async with transaction(ctx.pool) as conn:
            clean, secret = await oidc_connection.store_login_secret(conn, ctx.kek, console.tenant.id, clean,
                                                                     now=ctx.now())
            stored = await issuer_settings.update_settings(conn, console.tenant.id, clean, if_version=version)
            await audit.record(conn, console.actor, "issuer.settings_updated", target_type="tenant",
                               target_id=console.tenant.id,
                               details={"version": stored.version, "via": "dashboard", "login_client_secret": secret,
                                        "login_type": clean.login.type if clean.login else None})
    except Invalid as exc:
        return await _page(console, state, settings=wanted, version=version, errors=exc.fields, error=exc.detail,
                           status_code=422)
    except Conflict as exc:
        return await _page(console, state, error=exc.detail, status_code=409)
    return Redirect("/settings?notice=saved", status_code=303)


_CREDENTIALS = {
    CredentialsVerdict.REJECTED: "client ID or secret rejected by the IdP (invalid_client): check the client ID, "
                                 "enter the client secret again, and the client authentication method",
    CredentialsVerdict.NO_CLIENT_KEY: "no client key signs for private_key_jwt yet: rotate the client key",
    CredentialsVerdict.UNREACHABLE: "the IdP's token endpoint did not answer",
}


@post("/settings/login/test")
async def login_test(console: Console, state: State) -> Response[Any]:
    """"Test connection": discovery and the JWKS of the saved oidc connection, fetched afresh, then the
    client credentials at the token endpoint with a never issued code (`check_client_credentials`)."""
    console.require("write")
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        login = (await issuer_settings.get_settings(conn, console.tenant.id)).settings.login
    if login is None or login.type != "oidc" or login.issuer is None:
        return await _page(console, state, error="Save an OpenID Connect login connection first.", status_code=409)
    try:
        meta = await check_provider(login.issuer, tenant_id=console.tenant.id, fetcher=ctx.fetcher, redis=ctx.redis)
    except ProviderUnavailable as exc:
        why = _PROVIDER_PROBLEMS[exc.problem].format(issuer=login.issuer.rstrip("/"))
        return await _page(console, state, errors={"login.issuer": why}, error="The identity provider cannot be used.",
                           status_code=422)
    checked = await check_client_credentials(
        ctx.pool, ctx.kek, login, meta, tenant_id=console.tenant.id, now=int(ctx.now().timestamp()),
        redirect_uri=f"{ctx.issuer_url(console.tenant.slug)}/oidc/callback", fetcher=ctx.fetcher)
    if checked.verdict is CredentialsVerdict.ACCEPTED:
        return Redirect("/settings?notice=login_ok", status_code=303)
    why = _CREDENTIALS.get(checked.verdict) or (
        f"the IdP's token endpoint answered HTTP {checked.status} {checked.error or '(no error code)'}, "
        "neither invalid_client nor invalid_grant")
    return await _page(console, state, errors={"login.client_id": why}, status_code=422,
                       error="Discovery and keys are fine, but the client credentials could not be confirmed.")


def _test_flow(console: Console) -> str:
    """The test sign-in's ``flow_id``: bound to this admin's console session (its state is single-use)."""
    return TEST_FLOW_PREFIX + hashlib.sha256(console.session.session_id.encode()).hexdigest()


@post("/settings/login/test-sign-in")
async def login_test_sign_in(console: Console, state: State) -> Response[Any]:
    """"Sign in to test": the authorization code flow (PKCE, state, nonce) against the saved oidc connection,
    marked as a test; the IdP answers at the issuer's ``/oidc/callback``, which hands it to `login_test_result`."""
    console.require("write")
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        login = (await issuer_settings.get_settings(conn, console.tenant.id)).settings.login
    if login is None or login.type != "oidc" or login.issuer is None:
        return await _page(console, state, error="Save an OpenID Connect login connection first.", status_code=409)
    try:
        url = await start_oidc_login(login, tenant_id=console.tenant.id, flow_id=_test_flow(console),
                                     redirect_uri=f"{ctx.issuer_url(console.tenant.slug)}/oidc/callback",
                                     fetcher=ctx.fetcher, redis=ctx.redis)
    except ProviderUnavailable as exc:
        why = _PROVIDER_PROBLEMS[exc.problem].format(issuer=login.issuer.rstrip("/"))
        return await _page(console, state, errors={"login.issuer": why}, error="The identity provider cannot be used.",
                           status_code=422)
    return Redirect(url, status_code=303)


_TEST_FAILURES = {
    OidcFailure.UNKNOWN_STATE: "This test answer is unknown: it was used already, expired (10 minutes), or was "
                               "never started here. Start the test again from the settings page.",
    OidcFailure.OTHER_BROWSER: "This test was started from another console session. Start it again from this one.",
    OidcFailure.CONNECTION_CHANGED: "The login connection changed since the test started. Start it again.",
    OidcFailure.ISSUER: "The answer's iss is not your IdP's issuer (RFC 9207): check the issuer URL.",
    OidcFailure.NO_CODE: "The IdP sent no authorization code.",
    OidcFailure.INVALID_CLIENT: "client ID or secret rejected by the IdP (invalid_client) when redeeming the code.",
    OidcFailure.PROVIDER_DOWN: "The IdP did not answer as expected at its token endpoint or JWKS.",
    OidcFailure.USERINFO: "The IdP's userinfo endpoint did not answer with the same user.",
}


@get("/settings/login/test-result")
async def login_test_result(console: Console, state: State, request: Request[Any, Any, Any]) -> Template:
    """The IdP's answer to the test sign-in, handed on by the issuer's callback: finished like a sign-in (one-use
    state bound to this console session, PKCE, ID token checks), then shown; audited ``oidc_connection.tested``."""
    console.require("write")
    ctx = ctx_of(state)
    callback = f"{ctx.issuer_url(console.tenant.slug)}/oidc/callback"
    async with ctx.pool.acquire() as conn:
        login = (await issuer_settings.get_settings(conn, console.tenant.id)).settings.login
    query = request.query_params
    params = {name: str(query[name])[:4096] for name in ("code", "state", "iss", "error") if name in query}
    claim, account, problem, result = "", "", "", "ok"
    if login is None or login.type != "oidc":
        problem, result = "Save an OpenID Connect login connection first.", "no_connection"
    else:
        claim = login.account_claim
        try:
            vouched = await finish_oidc_login(ctx.pool, ctx.kek, login, tenant_id=console.tenant.id, params=params,
                                              flow_id=_test_flow(console), redirect_uri=callback,
                                              now=int(ctx.now().timestamp()), fetcher=ctx.fetcher, redis=ctx.redis)
            account = vouched.account_id
        except OidcLoginDenied as exc:
            result = f"idp_error:{exc.error}"
            problem = f"Your IdP answered error={exc.error}."
            if exc.error in ("invalid_request", "invalid_redirect_uri", "unauthorized_client"):
                problem += f" If it is about the redirect URI, register this redirect URI at your IdP: {callback}"
        except OidcLoginFailed as exc:
            result = str(exc.reason) + (f":{exc.check}" if exc.check else "")
            if exc.reason is OidcFailure.TOKEN_REFUSED:
                problem = ("The IdP refused to redeem the code (invalid_grant: used, expired, or a redirect URI "
                           f"mismatch). Register this redirect URI at your IdP: {callback}")
            elif exc.reason is OidcFailure.ID_TOKEN:
                problem = f"The IdP's ID token failed a check: {exc.check}."
            elif exc.reason is OidcFailure.NO_ACCOUNT:
                problem = (f"The ID token has no usable {claim} claim"
                           + (" (email needs email_verified: true)." if claim == "email" else "."))
            else:
                problem = _TEST_FAILURES.get(exc.reason, "The test sign-in could not be completed.")
    if result not in ("no_connection",) and not result.startswith(("unknown_state", "other_browser")):
        async with transaction(ctx.pool) as conn:
            await audit.record(conn, console.actor, "oidc_connection.tested", target_type="tenant",
                               target_id=console.tenant.id, details={"result": result, "via": "dashboard"})
    return console.page("login_test_result.html", nav="settings", ok=not problem, claim=claim, account=account,
                        problem=problem, callback=callback,
                        status_code=200 if not problem else 404 if result == "no_connection" else 422)


class RotateForm(msgspec.Struct, frozen=True, kw_only=True):
    compromised: str = ""
    confirm: str = ""


def _rotate_confirm(console: Console, compromised: bool) -> Template:
    if compromised:
        message = ("The new key signs at once and every other key leaves the JWKS now: every token they signed "
                   "stops verifying, so every agent must start a new Session. Use this only if a key leaked.")
    else:
        message = ("The new key is published now and starts signing after the lead time; the current key keeps "
                   "verifying until everything it signed has expired. Nobody is signed out.")
    return confirm_page(console, nav="settings", title="Rotate the signing key?", message=message,
                        subject="Compromised: replace immediately" if compromised else "Scheduled rotation",
                        action="/settings/rotate-key", button="Rotate key", cancel="/settings",
                        danger=compromised, fields={"compromised": "yes" if compromised else ""})


@get("/settings/rotate-key")
async def rotate_confirm(console: Console, compromised: bool = Parameter(default=False)) -> Template:
    return _rotate_confirm(console, compromised)


@post("/settings/rotate-key")
async def rotate(data: Annotated[RotateForm, FORM], console: Console, state: State) -> Response[Any]:
    console.require("write")
    compromised = data.compromised == "yes"
    if data.confirm != "yes":
        return _rotate_confirm(console, compromised)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        kid, at = await signing_keys.rotate_signing_key(conn, console.tenant.id, ctx.kek, ctx.now(),
                                                        publish_lead=ctx.settings.key_publish_lead,
                                                        compromised=compromised)
        await audit.record(conn, console.actor, "signing_key.rotated", target_type="signing_key", target_id=kid,
                           details={"activates_at": at.isoformat(), "compromised": compromised, "via": "dashboard"})
    return Redirect(f"/settings?notice={'rotated_now' if compromised else 'rotated'}", status_code=303)


def _client_key_confirm(console: Console, compromised: bool) -> Template:
    if compromised:
        message = ("The new client key signs at once and the old one leaves /oidc/jwks.json now. An IdP that cached "
                   "the JWKS must fetch it again before it accepts the new key; sign-ins may fail until it does.")
    else:
        message = ("The new client key is published at /oidc/jwks.json now and signs after the lead time; the "
                   "current key signs until then and stays published until it expires. Nobody is signed out.")
    return confirm_page(console, nav="settings", title="Rotate the OpenID Connect client key?", message=message,
                        subject="Compromised: replace immediately" if compromised else "Scheduled rotation",
                        action="/settings/login/rotate-client-key", button="Rotate client key", cancel="/settings",
                        danger=compromised, fields={"compromised": "yes" if compromised else ""})


@get("/settings/login/rotate-client-key")
async def client_key_rotate_confirm(console: Console, compromised: bool = Parameter(default=False)) -> Template:
    console.require("write")
    return _client_key_confirm(console, compromised)


@post("/settings/login/rotate-client-key")
async def client_key_rotate(data: Annotated[RotateForm, FORM], console: Console, state: State) -> Response[Any]:
    """Rotate the ``private_key_jwt`` client key (audited ``oidc_client_key.rotated``)."""
    console.require("write")
    compromised = data.compromised == "yes"
    if data.confirm != "yes":
        return _client_key_confirm(console, compromised)
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            login = (await issuer_settings.get_settings(conn, console.tenant.id)).settings.login
            if login is None or login.type != "oidc" or login.token_endpoint_auth_method != "private_key_jwt":
                raise NotFound("no_client_key", "Save an OpenID Connect connection with private_key_jwt first.")
            done = await oidc_client_key.rotate_client_key(conn, ctx.kek, console.tenant.id, now=ctx.now(),
                                                           publish_lead=ctx.settings.key_publish_lead,
                                                           compromised=compromised)
            await audit.record(conn, console.actor, "oidc_client_key.rotated", target_type="oidc_client_key",
                               target_id=done.kid, details={
                                   "activates_at": done.activates_at.isoformat(), "previous_kid": done.previous_kid,
                                   "superseded_kid": done.superseded_kid, "compromised": compromised,
                                   "via": "dashboard"})
    except NotFound as exc:
        return await _page(console, state, error=exc.detail, status_code=409)
    except Conflict as exc:
        wait = int(exc.extra.get("retry_after", 0))
        return await _page(console, state, status_code=409,
                           error=f"The key replaced by the last rotation is still published: rotate again in "
                                 f"{wait // 60 + 1} minutes, or replace it now if it leaked.")
    return Redirect(f"/settings?notice={'client_key_rotated_now' if compromised else 'client_key_rotated'}",
                    status_code=303)


routes: list[Any] = [settings_page, settings_save, login_test, login_test_sign_in, login_test_result, rotate_confirm, rotate, client_key_rotate_confirm,
                     client_key_rotate]
