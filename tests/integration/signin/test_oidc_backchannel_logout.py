"""OpenID Connect Back-Channel Logout 1.0 at ``{issuer}/oidc/backchannel-logout``.

The tenant's ``login`` is an ``oidc`` connection with ``backchannel_logout`` on, whose IdP
is a real ``oidc-provider``: the issuer reads the IdP's discovery document and JWKS from
it. The logout tokens are signed here with the IdP's own key (the one it publishes), so
each test chooses exactly the claims §2.6 is about: a forged one, a wrong ``aud``, a
replayed ``jti``, a ``nonce``, no ``events``, a wrong ``typ``; and that a valid one signs
the account's Sessions out and revokes its Account Tokens in that tenant only, and that a
token whose revocation failed is not used up (the IdP's retry applies).
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from frontdoor_core.settings import Settings
from frontdoor_sessions.disconnect import disconnect_account
from joserfc import jwt
from litestar.testing import AsyncTestClient

from tests.integration.signin.conftest import new_agent
from tests.integration.signin.test_oidc_sign_in import Stage, idp, staged  # noqa: F401 (the module's IdP)
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import OpenIdProvider, new_key

EVENT = "http://schemas.openid.net/event/backchannel-logout"


def logout_token(stage: Stage, clock: ShiftableClock, *, key: Any = None, typ: str | None = "logout+jwt",
                 **changes: Any) -> str:
    now = int(clock().timestamp())
    claims: dict[str, Any] = {"iss": stage.idp.issuer, "aud": "fd-basic", "iat": now, "exp": now + 120,
                              "jti": secrets.token_urlsafe(16), "sub": "ada",
                              "events": {EVENT: {}}}
    claims.update(changes)
    header = {"alg": "RS256", "kid": stage.idp.key.kid, **({"typ": typ} if typ else {})}
    return jwt.encode(header, {k: v for k, v in claims.items() if v is not None}, key or stage.idp.key,
                      default_type=None)  # typ only as the test says


async def post_logout(stage: Stage, token: str) -> Any:
    return await stage.issuer.post(f"/{stage.tenant.slug}/oidc/backchannel-logout", data={"logout_token": token})


async def signed_in(stage: Stage, web: MockWeb, account: str = "ada") -> tuple[Any, dict[str, Any]]:
    agent = new_agent(web)
    return agent, await stage.company.sign_in(agent, "alice", account, scope="poppy:read")


async def test_a_valid_logout_token_signs_the_account_out(settings: Settings, console: AsyncTestClient[Any],
                                                          clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                          idp: OpenIdProvider) -> None:  # noqa: F811
    async with staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as stage:
        c = stage.company
        agent, ada = await signed_in(stage, web)
        _, grace = await signed_in(stage, web, "grace")
        assert (await c.introspect(ada["access_token"]))["signed_in"] is True
        token = logout_token(stage, clock)
        r = await post_logout(stage, token)
        assert r.status_code == 200, r.text
        assert r.headers["cache-control"] == "no-store"
        # Ada's Session is signed out at once, and her Account Token no longer works.
        seen = await c.introspect(ada["access_token"])
        assert seen["active"] is True and seen["signed_in"] is False
        refresh = await c.refresh(agent, ada["refresh_token"])
        assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
        # Another account of the tenant is untouched.
        assert (await c.introspect(grace["access_token"]))["signed_in"] is True
        # The same token again is a replay.
        again = await post_logout(stage, token)
        assert again.status_code == 400 and again.json()["error"] == "invalid_request"
        async with runtime.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT actor_type, details::text AS details FROM audit_log WHERE tenant_id = $1"
                                      " AND action = 'account.disconnected' AND target_id = 'ada'", stage.tenant.id)
        assert row is not None and row["actor_type"] == "system" and "oidc_backchannel_logout" in row["details"]


REFUSED: dict[str, dict[str, Any]] = {
    "wrong_aud": {"aud": "someone-else"},
    "wrong_iss": {"iss": "http://127.0.0.1:1"},
    "nonce_present": {"nonce": "n-1"},
    "no_events": {"events": None},
    "other_event": {"events": {"http://schemas.openid.net/event/other": {}}},
    "no_sub_nor_sid": {"sub": None},
    "empty_sid": {"sub": None, "sid": ""},
    "sid_not_a_string": {"sid": 7},
    "no_jti": {"jti": None},
    "too_old": {"iat": 1},
    "wrong_typ": {"typ": "at+jwt"},
    "secevent_typ": {"typ": "secevent+jwt"},
    # An ID token replayed as a logout token, whatever its typ: no events, and a nonce.
    "id_token_typed_jwt": {"typ": "JWT", "events": None, "nonce": "n-1"},
    "id_token_untyped": {"typ": None, "events": None, "nonce": "n-1"},
}


@pytest.mark.parametrize("case", [*REFUSED, "forged"])
async def test_bad_logout_tokens_are_refused(case: str, settings: Settings, console: AsyncTestClient[Any],
                                             clock: ShiftableClock, runtime: Any, web: MockWeb,
                                             idp: OpenIdProvider) -> None:  # noqa: F811
    async with staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as stage:
        _, ada = await signed_in(stage, web)
        if case == "forged":
            token = logout_token(stage, clock, key=new_key(stage.idp.key.kid))  # same kid, another key
        else:
            changes = dict(REFUSED[case])
            token = logout_token(stage, clock, typ=changes.pop("typ", "logout+jwt"), **changes)
        r = await post_logout(stage, token)
        assert r.status_code == 400, r.text
        assert r.json()["error"] == "invalid_request" and r.headers["cache-control"] == "no-store"
        assert (await stage.company.introspect(ada["access_token"]))["signed_in"] is True


@pytest.mark.parametrize("typ", [None, "JWT", "logout+jwt", "LOGOUT+JWT", "application/logout+jwt"])
async def test_each_accepted_typ_signs_the_account_out(typ: str | None, settings: Settings,
                                                       console: AsyncTestClient[Any], clock: ShiftableClock,
                                                       runtime: Any, web: MockWeb,
                                                       idp: OpenIdProvider) -> None:  # noqa: F811
    """§2.4: ``logout+jwt`` SHOULD be the ``typ``; none, or an older IdP's ``JWT``, is accepted too."""
    async with staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as stage:
        _, ada = await signed_in(stage, web)
        r = await post_logout(stage, logout_token(stage, clock, typ=typ))
        assert r.status_code == 200, r.text
        assert (await stage.company.introspect(ada["access_token"]))["signed_in"] is False


async def test_a_logout_for_one_tenant_never_touches_another(settings: Settings, console: AsyncTestClient[Any],
                                                            clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                            idp: OpenIdProvider) -> None:  # noqa: F811
    async with (staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as a,
                staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as b):
        _, in_a = await signed_in(a, web)
        _, in_b = await signed_in(b, web)  # the same IdP user, signed in to tenant B too
        assert (await post_logout(a, logout_token(a, clock))).status_code == 200
        assert (await a.company.introspect(in_a["access_token"]))["signed_in"] is False
        assert (await b.company.introspect(in_b["access_token"]))["signed_in"] is True


async def test_off_unless_the_connection_turns_it_on(settings: Settings, console: AsyncTestClient[Any],
                                                     clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                     idp: OpenIdProvider) -> None:  # noqa: F811
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        _, ada = await signed_in(stage, web)
        r = await post_logout(stage, logout_token(stage, clock))
        assert r.status_code == 404
        assert (await stage.company.introspect(ada["access_token"]))["signed_in"] is True


async def test_a_failed_disconnect_does_not_use_up_the_token(settings: Settings, console: AsyncTestClient[Any],
                                                             clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                             idp: OpenIdProvider,  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``sub``-only token whose transaction fails: its ``jti`` is released, the retry signs Ada out."""
    async with staged(settings, console, clock, runtime, web, idp, backchannel_logout=True) as stage:
        _, ada = await signed_in(stage, web)
        calls: list[str] = []

        async def fails_once(*args: Any, **kwargs: Any) -> Any:
            calls.append(kwargs["account_id"])
            if len(calls) == 1:
                raise ConnectionResetError("the database went away")
            return await disconnect_account(*args, **kwargs)

        monkeypatch.setattr("frontdoor_sessions.oidc_backchannel_logout.disconnect_account", fails_once)
        token = logout_token(stage, clock)
        assert (await post_logout(stage, token)).status_code == 500
        assert (await stage.company.introspect(ada["access_token"]))["signed_in"] is True
        r = await post_logout(stage, token)
        assert r.status_code == 200, r.text
        assert calls == ["ada", "ada"]
        assert (await stage.company.introspect(ada["access_token"]))["signed_in"] is False
        again = await post_logout(stage, token)
        assert again.status_code == 400 and again.json()["error"] == "invalid_request"
