"""Session state from the Shared Signals stream (ADR 0005), the sdk against the real issuer.

The sdk's HTTP goes through :class:`Route`, which forwards to the in-process issuer and
lets a test count introspections, stall or cut the stream, and rewrite poll answers
(forged or replayed SETs). Every revoke goes through the real console or issuer, which
waits for the stream's acknowledgement or marks it behind.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from frontdoor_sessions import StreamPolicy
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.signing_keys import load_signer
from joserfc import jwt
from joserfc.jwk import ECKey
from litestar.testing import AsyncTestClient

from tests.support.agent import TestAgent
from tests.support.eventually import eventually

from .conftest import Company, resource_credential

API = "https://shop.example/api/orders"
_FAST = StreamPolicy(hold=0.3, lease=1.5, ack_wait=0.3)


async def call(client: AsyncTestClient[Any], method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request to an in-process app without blocking this event loop.

    The test client's transport is synchronous (it waits for the app's portal thread), so
    a poll held open, or a revoke waiting for the stream's acknowledgement, would otherwise
    stop the sdk's own task from running at all.
    """
    request = client.build_request(method, url, **kwargs)

    def send() -> httpx.Response:
        response = client._transport.handle_request(request)
        response.read()
        return response

    return await asyncio.to_thread(send)


class Route(httpx.AsyncBaseTransport):
    """The sdk's view of Frontdoor, with the stream under the test's control."""

    def __init__(self, issuer: AsyncTestClient[Any]) -> None:
        self.issuer = issuer
        self.introspections = 0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.cut = False
        self.rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.seen: dict[str, str] = {}
        self.blocked = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        poll = path.endswith("/poll")
        if poll:
            if not self.flowing.is_set():
                self.blocked += 1
                await self.flowing.wait()
                self.blocked -= 1
            if self.cut:
                raise httpx.ConnectError("the stream is cut")
        if path.endswith("/oauth/introspect"):
            self.introspections += 1
        body = await request.aread()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length"}}
        answer = await call(self.issuer, request.method, str(request.url), content=body, headers=headers)
        content = answer.content
        if poll and answer.status_code == 200:
            doc = answer.json()
            self.seen.update(doc["sets"])
            if self.rewrite is not None:
                doc = self.rewrite(doc)
            content = json.dumps(doc).encode()
        return httpx.Response(answer.status_code, content=content,
                              headers={"content-type": answer.headers.get("content-type", "application/json")})


async def _stall(route: Route) -> None:
    """Hold the stream: return once the sdk's next poll is waiting (nothing is in flight)."""
    route.flowing.clear()

    async def probe() -> None:
        assert route.blocked >= 1
    await eventually(probe)


@pytest.fixture(autouse=True)
def fast_streams(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any]) -> Any:
    """Short holds and leases, so a stalled stream costs a revoke ~2 s here, not ~6 s."""
    apps = [console.app, issuer.app]
    for app in apps:
        app.state.ssf_policy = _FAST
    yield
    for app in apps:
        del app.state.ssf_policy


@pytest.fixture
async def route(issuer: AsyncTestClient[Any]) -> Route:
    return Route(issuer)


@pytest.fixture
async def verifier(company: Company, route: Route) -> AsyncIterator[FrontdoorVerifier]:
    http = httpx.AsyncClient(transport=route, base_url="https://issuer.frontdoor.test")
    v = FrontdoorVerifier(company.tenant.issuer, company.credential, http=http, clock=company.clock,
                          shared_signals=True)
    async with v:
        await eventually(_live(v))
        yield v
    await http.aclose()


def _live(v: FrontdoorVerifier) -> Callable[[], Any]:
    async def probe() -> None:
        assert v.signals is not None and v.signals.live
    return probe


def _headers(company: Company, agent: TestAgent, token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"DPoP {token}"), ("DPoP", agent.dpop("GET", API, token=token, iat=company.now()))]


async def _verify(v: FrontdoorVerifier, company: Company, agent: TestAgent, token: str,
                  scopes: tuple[str, ...] = ()) -> Caller | Refusal:
    return await v.verify("GET", API, _headers(company, agent, token), required_scopes=scopes)


async def _caches(v: FrontdoorVerifier, route: Route, company: Company, agent: TestAgent, token: str) -> Caller:
    """Verify until the answer comes from memory (no introspection).

    An answer is not kept when an event was applied while it was asked (the sign-in's own
    event often is), so it may take a few requests.
    """
    async def probe() -> Caller:
        first = await _verify(v, company, agent, token)
        assert isinstance(first, Caller), first
        before = route.introspections
        again = await _verify(v, company, agent, token)
        assert isinstance(again, Caller), again
        assert route.introspections == before, "a live stream answers from memory"
        return again
    return await eventually(probe)


async def _head(db: Any, tenant_id: str) -> int:
    return int(await db.fetchval("SELECT coalesce(max(seq), 0) FROM session_event_counters WHERE tenant_id = $1",
                                 tenant_id))


async def test_events_apply_in_order_and_are_acknowledged(console: AsyncTestClient[Any], company: Company,
                                                          agent: TestAgent, verifier: FrontdoorVerifier,
                                                          route: Route, db: Any) -> None:
    """A narrowing then a disconnect, delivered together: applied in seq order, the last one wins."""
    signed = await company.sign_in(agent, "alice", "acct-1")
    token = signed["access_token"]
    held = await _caches(verifier, route, company, agent, token)
    assert held.signed_in and held.scopes == {"poppy:read", "poppy:write"}
    await _stall(route)  # both events wait at the stream, then arrive in one answer
    narrowed = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"],
                                     scope="poppy:read")
    assert narrowed.status_code == 200, narrowed.text
    revoke = asyncio.create_task(call(console, "POST", "/api/v1/accounts/acct-1/disconnect",
                                      headers=company.tenant.auth))
    await asyncio.sleep(0.05)
    route.flowing.set()
    assert (await revoke).status_code == 200
    signals = verifier.signals
    assert signals is not None
    head = await _head(db, company.tenant.id)
    await eventually(_live(verifier))
    assert signals.position == head
    seqs = sorted(_unverified(s)["seq"] for s in route.seen.values())
    assert seqs == list(range(seqs[0], head + 1)), "every position delivered once, densely"
    after = await _verify(verifier, company, agent, narrowed.json()["access_token"], ("poppy:read",))
    assert isinstance(after, Refusal) and after.error == "sign_in_required"
    await eventually(_acked(db, company, signals.stream_id, head))


def _acked(db: Any, company: Company, stream_id: str | None, head: int) -> Callable[[], Any]:
    async def probe() -> None:
        acked = await db.fetchval("SELECT acked_seq FROM ssf_streams WHERE tenant_id = $1 AND id = $2",
                                  company.tenant.id, stream_id)
        assert acked == head
    return probe


def _unverified(token: str) -> dict[str, Any]:
    import base64
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


async def test_a_revoke_with_a_live_stream_is_refused_on_the_next_request(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, verifier: FrontdoorVerifier,
        route: Route) -> None:
    """The stream acknowledges the block before the management API answers; memory is never stale."""
    token = (await company.sign_in(agent, "bob", "acct-2"))["access_token"]
    await _caches(verifier, route, company, agent, token)
    r = await call(console, "POST", "/api/v1/agents/block", json={"client_id": agent.client_id},
                   headers=company.tenant.auth)
    assert r.status_code == 200
    assert verifier.signals is not None and verifier.signals.live, "acknowledged: never marked behind"
    ended = await _verify(verifier, company, agent, token)
    assert isinstance(ended, Refusal) and (ended.status, ended.error) == (401, "invalid_token")
    await console.post("/api/v1/agents/unblock", json={"client_id": agent.client_id}, headers=company.tenant.auth)


async def test_a_stalled_stream_is_marked_behind_and_the_next_request_is_refused(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, verifier: FrontdoorVerifier,
        route: Route, db: Any) -> None:
    """The receiver stops answering; the revoke returns after its lease ran out, never before."""
    signed = await company.sign_in(agent, "carol", "acct-3")
    token = signed["access_token"]
    held = await _caches(verifier, route, company, agent, token)
    assert held.signed_in
    await _stall(route)  # its polls never reach Frontdoor; it may serve from memory while its lease runs
    r = await call(console, "POST", "/api/v1/accounts/acct-3/disconnect", headers=company.tenant.auth)
    assert r.status_code == 200 and r.json()["sessions_signed_out"] == 1
    signals = verifier.signals
    assert signals is not None and not signals.live, "its lease ran out before the revoke answered"
    after = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(after, Refusal) and after.error == "sign_in_required"
    assert await db.fetchval("SELECT behind FROM ssf_streams WHERE tenant_id = $1 AND id = $2",
                             company.tenant.id, signals.stream_id) is True
    resyncs = signals.resyncs
    route.flowing.set()
    await eventually(_live(verifier))
    assert signals.resyncs == resyncs + 1, "behind: everything held was dropped"
    still = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(still, Refusal) and still.error == "sign_in_required"


async def test_a_revoke_during_a_reconnect(console: AsyncTestClient[Any], company: Company, agent: TestAgent,
                                           verifier: FrontdoorVerifier, route: Route) -> None:
    """Polls fail while the Session ends in the dashboard's way; nothing stale survives the reconnect."""
    token = (await company.sign_in(agent, "dan", "acct-4"))["access_token"]
    await _caches(verifier, route, company, agent, token)
    await _stall(route)
    route.cut = True
    route.flowing.set()  # the waiting poll fails, and every retry until the cut ends
    r = await call(console, "POST", "/api/v1/agents/revoke-tokens", json={"client_id": agent.client_id},
                   headers=company.tenant.auth)
    assert r.status_code == 200
    after = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(after, Refusal) and after.error == "sign_in_required"
    route.cut = False
    await eventually(_live(verifier))
    again = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(again, Refusal) and again.error == "sign_in_required"


async def test_a_missed_event_falls_back_to_introspection(company: Company, agent: TestAgent, web: Any,
                                                          verifier: FrontdoorVerifier, route: Route,
                                                          db: Any) -> None:
    """An event the stream can no longer deliver (pruned) is a gap: memory dropped, Frontdoor asked."""
    token = (await company.sign_in(agent, "erin", "acct-5"))["access_token"]
    await _caches(verifier, route, company, agent, token)
    signals = verifier.signals
    assert signals is not None
    await _stall(route)
    await company.sign_in(agent, "erin-2", "acct-5")
    await company.sign_in(agent, "erin-3", "acct-5")
    head = await _head(db, company.tenant.id)
    await db.execute("DELETE FROM session_events WHERE tenant_id = $1 AND stream_seq = $2",
                     company.tenant.id, head - 1)
    resyncs = signals.resyncs
    route.flowing.set()
    await eventually(_resynced(verifier, resyncs))
    before = route.introspections
    fallback = await _verify(verifier, company, agent, token)
    assert isinstance(fallback, Caller) and route.introspections == before + 1, "nothing held: Frontdoor is asked"
    await eventually(_live(verifier))
    assert signals.position == head


def _resynced(v: FrontdoorVerifier, before: int) -> Callable[[], Any]:
    async def probe() -> None:
        assert v.signals is not None and v.signals.resyncs > before
    return probe


async def _signer(db: Any, settings: Settings, company: Company) -> tuple[ECKey, str]:
    """The tenant's real signing key: the forgeries below are otherwise perfect SETs."""
    signer = await load_signer(db, company.tenant.id, Kek.from_env_value(settings.kek), company.clock())
    return signer.key, signer.kid


@pytest.mark.parametrize("forgery", ["wrong_key", "wrong_aud", "wrong_typ", "wrong_iss"])
async def test_a_forged_set_is_never_applied(db: Any, settings: Settings, company: Company, agent: TestAgent,
                                             verifier: FrontdoorVerifier, route: Route, forgery: str) -> None:
    """A SET signing a signed-out Session in, forged four ways: refused, reported, memory dropped."""
    token = (await company.session(agent, "frank"))["access_token"]
    held = await _caches(verifier, route, company, agent, token)
    assert not held.signed_in
    signals = verifier.signals
    assert signals is not None and signals.stream_id is not None and signals.position is not None
    key, kid = await _signer(db, settings, company)
    header = {"alg": "ES256", "typ": "secevent+jwt", "kid": kid}
    claims = {"iss": company.tenant.issuer, "aud": signals.stream_id, "jti": "evt_forged", "iat": company.now(),
              "seq": signals.position + 1,
              "sub_id": {"format": "complex", "session": {"format": "opaque", "id": held.session_id},
                         "application": {"format": "uri", "uri": agent.client_id}},
              "events": {"https://schemas.openid.net/secevent/caep/event-type/token-claims-change": {
                  "claims": {"signed_in": True, "account": "attacker", "scope": "poppy:read poppy:write"}}}}
    if forgery == "wrong_key":
        key = ECKey.generate_key("P-256")
    elif forgery == "wrong_aud":
        claims["aud"] = "sst_another"
    elif forgery == "wrong_typ":
        header["typ"] = "JWT"
    else:
        claims["iss"] = "https://issuer.frontdoor.test/another"
    forged = jwt.encode(header, claims, key)
    resyncs = signals.resyncs

    def inject(doc: dict[str, Any]) -> dict[str, Any]:
        route.rewrite = None
        return {**doc, "sets": {**doc["sets"], "evt_forged": forged}}

    route.rewrite = inject
    await eventually(_resynced(verifier, resyncs))
    outcome = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(outcome, Refusal) and outcome.error == "sign_in_required"


async def test_a_replayed_set_is_not_applied_twice(console: AsyncTestClient[Any], company: Company,
                                                   agent: TestAgent, verifier: FrontdoorVerifier,
                                                   route: Route) -> None:
    """The sign-in's SET, sent again after the sign-out: ignored (its seq and jti were applied)."""
    signed = await company.sign_in(agent, "gina", "acct-7")
    token = signed["access_token"]
    await _caches(verifier, route, company, agent, token)
    sign_in_sets = dict(route.seen)
    r = await call(console, "POST", "/api/v1/accounts/acct-7/disconnect", headers=company.tenant.auth)
    assert r.status_code == 200
    signals = verifier.signals
    assert signals is not None
    polls = signals.polls

    def replay(doc: dict[str, Any]) -> dict[str, Any]:
        route.rewrite = None
        return {**doc, "sets": {**doc["sets"], **sign_in_sets}}

    route.rewrite = replay
    await eventually(_polled(verifier, polls + 2))
    outcome = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(outcome, Refusal) and outcome.error == "sign_in_required"
    assert signals.live


def _polled(v: FrontdoorVerifier, polls: int) -> Callable[[], Any]:
    async def probe() -> None:
        assert v.signals is not None and v.signals.polls >= polls
    return probe


async def test_two_tenants_streams_are_isolated(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                company: Company, other_company: Company, agent: TestAgent,
                                                verifier: FrontdoorVerifier, db: Any) -> None:
    """B's credential cannot open or poll A's stream, and A's events never reach B's stream."""
    signals = verifier.signals
    assert signals is not None and signals.stream_id is not None
    theirs = {"Authorization": f"Bearer {other_company.credential}"}
    a = company.tenant.slug
    assert (await issuer.post(f"/{a}/ssf/streams", json={}, headers=theirs)).status_code == 401
    assert (await issuer.post(f"/{a}/ssf/streams/{signals.stream_id}/poll", json={}, headers=theirs)
            ).status_code == 401
    b = other_company.tenant.slug
    assert (await issuer.post(f"/{b}/ssf/streams/{signals.stream_id}/poll", json={"returnImmediately": True},
                              headers=theirs)).status_code == 404
    created = await issuer.post(f"/{b}/ssf/streams", json={}, headers=theirs)
    assert created.status_code == 201
    b_stream = created.json()["stream_id"]
    await company.sign_in(agent, "hal", "acct-8")
    polled = await issuer.post(f"/{b}/ssf/streams/{b_stream}/poll", json={"returnImmediately": True},
                               headers=theirs)
    assert polled.status_code == 200 and polled.json()["sets"] == {}
    again = await resource_credential(console, company.tenant)  # another credential of A: not A's stream either
    assert (await issuer.post(f"/{a}/ssf/streams/{signals.stream_id}/poll", json={"returnImmediately": True},
                              headers={"Authorization": f"Bearer {again}"})).status_code == 404


async def test_transmitter_metadata(issuer: AsyncTestClient[Any], company: Company) -> None:
    """SSF 1.0 §6.2: the path-inserted location (and the appended one) describe the poll delivery."""
    for path in (f"/.well-known/ssf-configuration/{company.tenant.slug}",
                 f"/{company.tenant.slug}/.well-known/ssf-configuration"):
        r = await issuer.get(path)
        assert r.status_code == 200, r.text
        doc = r.json()
        assert doc["issuer"] == company.tenant.issuer and doc["jwks_uri"] == f"{company.tenant.issuer}/jwks.json"
        assert doc["delivery_methods_supported"] == ["urn:ietf:rfc:8936"]
        assert doc["configuration_endpoint"] == f"{company.tenant.issuer}/ssf/streams"
    assert (await issuer.get("/.well-known/ssf-configuration/no-such-tenant")).status_code == 404


async def test_an_agents_rfc7009_revocation_with_a_stalled_stream(company: Company, agent: TestAgent,
                                                                  verifier: FrontdoorVerifier, route: Route) -> None:
    """POST {issuer}/oauth/revoke waits like the management API: the next request is signed out."""
    signed = await company.sign_in(agent, "ivy", "acct-10")
    token = signed["access_token"]
    held = await _caches(verifier, route, company, agent, token)
    assert held.signed_in
    await _stall(route)
    r = await call(company.issuer, "POST", f"/{company.tenant.slug}/oauth/revoke",
                   data={**company.client_form(agent), "token": signed["refresh_token"],
                         "token_type_hint": "refresh_token"})
    assert r.status_code == 200, r.text
    signals = verifier.signals
    assert signals is not None and not signals.live
    after = await _verify(verifier, company, agent, token, ("poppy:read",))
    assert isinstance(after, Refusal) and after.error == "sign_in_required"
    route.flowing.set()
    await eventually(_live(verifier))
