"""The conformance harness: the peer suite (``personal-agent-protocol`` 0.26.0) playing a
personal agent against Frontdoor's real apps, in-process, on real PostgreSQL and Redis.

``build_context(suites=...)`` is an async context manager yielding the runner's
``ConformanceContext``. It starts (or connects to) PostgreSQL and Redis as the test
command does, builds a fresh database, runs the console, the issuer and the example
company (Northwind) with their lifespans in the current event loop, and puts them on the
suite's ``InProcessNetwork`` beside two agent identities. The company is onboarded the
way a real one is, over HTTP: sign-up, domain claim and DNS verification, issuer
settings, a resource-server credential, and the generated ``poppy.json``. Conversations
are Frontdoor's hosted ones (``{ledger}/{slug}/conversations``), answered by Northwind's
concierge through the ``conversation.message.created`` webhook and the sdk.

``build_context(login="oidc")`` gives the tenant an OpenID Connect login connection to a real
OpenID Provider (npm ``oidc-provider``, `tests.support.oidc`) started for the context on
loopback instead of Northwind's signed handoff: the driver's users log in at the IdP's pages.

Usable outside pytest::

    async with build_context() as ctx:
        report = await run_conformance(ctx, cases=select_cases(suites=["security"]))
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Protocol

import httpx
from personal_agent_protocol.conformance import ConformanceContext, Proposal, Scenario
from personal_agent_protocol.demo.kit import AgentIdentity, InProcessNetwork, MutableClock
from personal_agent_protocol.operations import TermLimit

from tests.support.servers import start_servers

if TYPE_CHECKING:
    from tests.conformance.browser import Browser
    from tests.support.oidc import OpenIdProvider

COMPANY_DOMAIN = "northwind.example"
ISSUER_HOST = "issuer.frontdoor.test"
CONSOLE_HOST = "console.frontdoor.test"
LEDGER_HOST = "ledger.frontdoor.test"
_USER_ADDRESSES = itertools.count(1)  # users' browsers, one address each
from frontdoor_core.migrations import MIGRATED_PACKAGES  # noqa: E402

NORTHWIND_PASSWORD = "harness-" + secrets.token_hex(8)

#: How the tenant signs users in: Northwind's signed login handoff, or an OpenID Connect
#: connection to a real OpenID Provider (npm ``oidc-provider``, `tests.support.oidc`) on loopback.
Login = Literal["handoff", "oidc"]
IDP_CLIENT_ID = "frontdoor-conformance"

#: What the suite asks of Northwind: its reads, and its four kinds of proposal (Operations §4.1).
SCENARIO = Scenario(
    read_path="/api/orders",
    read_scope="orders:read",
    scopes=("orders:read", "poppy:read"),
    mcp_read_tool="list_orders",
    proposals={
        # Reorder the account's last order (38.00 EUR for acct_ada): needs the user's own approval.
        "user": Proposal("POST", "/api/orders/reorder", {}, documented_as="/api/orders/reorder"),
        # A small new order (36.00 EUR): a standing permission up to 50.00 EUR may cover it.
        "standing": Proposal("POST", "/api/orders", {"items": [{"sku": "NW-CHAI", "quantity": 2}]},
                             documented_as="/api/orders"),
        # NW-CHANG sells out after confirmation: performed partway, failed with what was done.
        "fails": Proposal("POST", "/api/orders", {"items": [{"sku": "NW-SYRUP", "quantity": 1},
                                                            {"sku": "NW-CHANG", "quantity": 1}]}),
        # NW-CAJUN waits for a supplier: the perform answers 202 and the outcome stays unknown.
        "unknown": Proposal("POST", "/api/orders", {"items": [{"sku": "NW-CAJUN", "quantity": 1}]}),
    },
    standing_action="order.place",
    standing_limits=(TermLimit("total.amount", maximum=Decimal("50.00")),
                     TermLimit("total.currency", allowed=frozenset({"EUR"}))),
    standing_too_low=(TermLimit("total.amount", maximum=Decimal("20.00")),),
    operation_prompt="Please reorder my last order.",
    # Northwind's concierge asks a signed-out user to sign in for orders:read (PAP-7.11-01).
    account_prompt="Where is my last order?",
    mcp_propose_tool="reorder",
    web_confirm_form={"revision": "{revision}"},
)

class FrontdoorDriver:
    """What the runner cannot do as an agent, done through Frontdoor's real surfaces.

    The user signs in from a browser, both ways Frontdoor offers: Device Sign-In
    (`approve_device`: Frontdoor's device page, Northwind's login page through the signed
    handoff, or with ``login="oidc"`` the IdP's login and consent pages and its redirect to
    ``{issuer}/oidc/callback``, then Frontdoor's consent page) and Direct Sign-In (`approve_authorization`: the
    agent's ``{issuer}/oauth/authorize`` URL, the same login and consent pages, then the
    redirect back to the agent's ``redirect_uri`` with ``code``, ``state`` and ``iss``).
    The company disconnects an agent (`disconnect`) through Frontdoor's account API,
    ``POST {issuer}/accounts/disconnect``, with its resource-server credential.

    The company revises an operation (`revise`) through Frontdoor's ledger API with its
    credential, and `performed` asks Northwind's webhook receiver how many times it
    performed an operation. Frontdoor keeps the conversations: `forget_events` forgets
    events through the ledger API, as retention does.
    """

    capabilities = frozenset({"clock", "second_identity", "disconnect", "direct_sign_in", "revise", "performed",
                              "forget_events"})
    accounts = ("acct_ada", "acct_grace")

    def __init__(self, clock: MutableClock, other: AgentIdentity, *, network: InProcessNetwork, issuer: str,
                 credential: str, password: str, ledger: str = "", company: Any = None,
                 login: Login = "handoff", idp: OpenIdProvider | None = None) -> None:
        if login not in ("handoff", "oidc"):
            raise ValueError(f"login is handoff or oidc, not {login!r}")
        self.clock = clock
        self.login: Login = login
        if (login == "oidc") != (idp is not None):
            raise ValueError("an oidc login needs its OpenID Provider, and only it")
        self._idp = idp
        self._idp_hosts = (idp.host,) if idp is not None else ()
        self.idp_logins = 0  # users who logged in at the IdP (``oidc``)
        self.other_identity: AgentIdentity | None = other
        self._network = network
        self._issuer = issuer
        self._credential = credential
        self._password = password
        self._ledger = ledger
        self.company: Any = company

    def _browser_http(self, address: str = "127.0.0.1") -> httpx.AsyncClient:
        """A user's browser: the in-process network, and the IdP's real pages on loopback."""
        return httpx.AsyncClient(transport=_NetworkTransport(self._network, address=address,
                                                             loopback=self._idp_hosts))

    async def _idp_follows_clock(self) -> None:
        """The suites move the injected clock forward (hours, across a lifecycle): the IdP's
        clock reads the same time, or its ID tokens' ``exp`` would be past on Frontdoor's."""
        if self._idp is not None:
            await self._idp.set_clock(self.clock.now())

    async def _sign_in(self, browser: Browser, login: httpx.Response, account: str) -> httpx.Response:
        """From the login page the sign-in sent the browser to, to Frontdoor's consent page.

        ``handoff``: Northwind's login form, then its signed answer back to Frontdoor.
        ``oidc``: the IdP's login form (its user ``account``: the ID token's ``sub``, the
        account Frontdoor maps), its consent form, then its redirect to ``{issuer}/oidc/callback``.
        """
        if self.login == "handoff":
            handoff = await browser.submit(login, {"email": f"{account.removeprefix('acct_')}@northwind.example",
                                                   "password": self._password})
            return await browser.submit(handoff)  # the signed answer goes back to Frontdoor
        if f"{login.url.host}:{login.url.port}" not in self._idp_hosts:
            raise AssertionError(f"the sign-in did not lead to the IdP but to {login.url} ({login.status_code})")
        self.idp_logins += 1
        page = await browser.submit(login, {"login": account, "password": self._password})
        for _ in range(3):  # the IdP's consent prompt, then the redirect back through the callback
            if page.url.host != "127.0.0.1":
                return page
            page = await browser.submit(page)
        raise AssertionError(f"the IdP did not send the browser back ({page.status_code}): {page.text[:300]}")

    async def approve_device(self, user_code: str, *, account: str, scopes: Sequence[str] | None = None) -> None:
        from tests.conformance.browser import Browser

        # Each user approves from their own browser and address, as people do: Frontdoor
        # limits code entries per address (60 per network a minute), and the suites sign in more.
        address = "198.18.{}.{}".format(*divmod(next(_USER_ADDRESSES) % 65536, 256))
        await self._idp_follows_clock()
        async with self._browser_http(address) as http:
            browser = Browser(http)
            page = await browser.open(f"{self._issuer}/device?user_code={user_code}")
            login = await browser.submit(page)  # confirming the code leads to the login page
            consent = await self._sign_in(browser, login, account)
            if "Allow" not in consent.text:
                raise AssertionError(f"no consent page ({consent.status_code}): {consent.text[:300]}")
            values: dict[str, str | list[str]] = {}
            if scopes is not None:
                values["scope"] = list(scopes)
            done = await browser.submit(consent, values, button=("decision", "allow"))
            if "connected" not in done.text and "denied" not in done.text.lower():
                raise AssertionError(f"consent did not complete ({done.status_code}): {done.text[:300]}")

    async def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    async def approve_authorization(self, authorization_url: str, *, account: str,
                                    scopes: Sequence[str] | None = None) -> str:
        """Direct Sign-In as the user: Frontdoor's authorization URL, the login (Northwind's page
        and the handoff, or the IdP's pages), Frontdoor's consent page. Answers the URL Frontdoor redirected to, on the
        agent's host (not followed: the agent's own callback takes it from there)."""
        from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

        from tests.conformance.browser import Browser, forms

        redirect_uri = parse_qs(urlsplit(authorization_url).query).get("redirect_uri", [""])[0]

        def to_agent(response: httpx.Response) -> str | None:
            location = urljoin(str(response.url), response.headers.get("location", ""))
            sent_back = response.status_code in (302, 303) and redirect_uri
            return location if sent_back and location.split("?")[0] == redirect_uri.split("?")[0] else None

        await self._idp_follows_clock()
        async with self._browser_http() as http:
            browser = Browser(http)
            first = await http.get(authorization_url)
            refused = to_agent(first)  # a refusal goes straight back to the agent
            if refused is not None:
                return refused
            if first.status_code != 303:
                raise AssertionError(f"the authorization URL answered {first.status_code}: {first.text[:300]}")
            login = await browser.open(urljoin(authorization_url, first.headers["location"]))
            consent = await self._sign_in(browser, login, account)
            found = forms(consent.text)
            if "Allow" not in consent.text or not found:
                raise AssertionError(f"no consent page ({consent.status_code}): {consent.text[:300]}")
            form = found[0]
            fields = {k: list(v) for k, v in form.fields.items() if k}
            if scopes is not None:
                fields["scope"] = list(scopes)
            data = [(k, x) for k, vs in fields.items() for x in vs] + [("decision", "allow")]
            decided = await http.post(urljoin(str(consent.url), form.action), content=urlencode(data).encode(),
                                      headers={"Content-Type": "application/x-www-form-urlencoded"})
            back = to_agent(decided)
            if back is None:
                raise AssertionError(f"consent did not send the browser back ({decided.status_code}): "
                                     f"{decided.text[:300]}")
            return back

    async def revise(self, operation_id: str) -> None:
        """The company changes the terms (a price rise): the next revision, through the ledger API."""
        auth = {"Authorization": f"Bearer {self._credential}"}
        async with self._network.client() as http:
            current = (await http.get(f"{self._ledger}/v1/operations/{operation_id}", headers=auth)).json()
            op = current["operation"]
            terms = dict(op.get("terms") or {})
            total = dict(terms.get("total") or {"currency": "EUR", "amount": "0.00"})
            total["amount"] = f"{Decimal(str(total['amount'])) + Decimal('1.50'):.2f}"
            terms["total"] = total
            r = await http.post(f"{self._ledger}/v1/operations/{operation_id}/revisions", headers=auth, json={
                "summary": op["summary"] + f" (price now {total['amount']} {total.get('currency', 'EUR')})",
                "terms": terms})
            if r.status_code != 200:
                raise AssertionError(f"revise failed: {r.status_code} {r.text[:200]}")

    async def forget_events(self, conversation_id: str) -> None:
        """Retention, now: the company forgets all but the last event through the ledger API."""
        async with self._network.client() as http:
            r = await http.post(f"{self._ledger}/v1/conversations/{conversation_id}/forget-events",
                                json={"keep_last": 1}, headers={"Authorization": f"Bearer {self._credential}"})
            if r.status_code != 200 or r.json()["forgotten"] < 1:
                raise AssertionError(f"forget-events: {r.status_code} {r.text[:200]}")

    async def disconnect(self, client_id: str, account: str) -> None:
        async with self._network.client() as http:
            r = await http.post(f"{self._issuer}/accounts/disconnect", json={"account": account, "client_id": client_id},
                                headers={"Authorization": f"Bearer {self._credential}"})
            if r.status_code >= 300:
                raise AssertionError(f"disconnect failed: {r.status_code} {r.text[:200]}")

    async def performed(self, operation_id: str) -> int:
        from northwind.perform import performer_of

        return int(performer_of(self.company).performed(operation_id))


class _StaticTxt:
    """The DNS the console's verifier sees: exactly the records the company published."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[str, ...]] = {}

    def set_txt(self, name: str, records: list[str]) -> None:
        self.records[name.lower().rstrip(".")] = tuple(records)

    async def lookup(self, name: str) -> Any:
        from frontdoor_tenancy.domains import Absent, Found

        values = self.records.get(name.lower().rstrip("."))
        return Found(values=values) if values else Absent(reason="nxdomain")


class _NetworkTransport(httpx.AsyncBaseTransport):
    """Frontdoor's outbound client on the in-process network (agent metadata, publish checks)."""

    def __init__(self, network: InProcessNetwork, *, address: str = "127.0.0.1",
                 loopback: Sequence[str] = ()) -> None:
        self._network = network
        self._client = (address, 443)
        self._loopback = frozenset(loopback)  # host:port of real servers (the IdP), over a socket
        self._real = httpx.AsyncHTTPTransport() if loopback else None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._real is not None and f"{request.url.host}:{request.url.port}" in self._loopback:
            return await self._real.handle_async_request(request)
        app = self._network.apps.get(request.url.host or "")
        if request.url.scheme != "https" or app is None:
            raise httpx.ConnectError(f"{request.url.host} is not on the network", request=request)
        return await httpx.ASGITransport(app=app, client=self._client).handle_async_request(request)

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()


class TxtZone(Protocol):
    """Where the company publishes its domain claim's TXT record (`_StaticTxt`, or a real nameserver)."""

    def set_txt(self, name: str, records: list[str]) -> None: ...


@dataclass(frozen=True)
class Onboarded:
    """What Northwind keeps from its onboarding, and its app configured with it."""

    slug: str
    domain: str
    issuer: str
    credential: str  # the resource-server credential's secret
    poppy: dict[str, Any]
    webhook_secret: str

    @property
    def ledger(self) -> str:
        return f"https://{LEDGER_HOST}/{self.slug}"

    def company(self, http_client: httpx.AsyncClient, clock: Callable[[], datetime]) -> Any:
        """Northwind (examples/northwind) for this tenant, calling out through ``http_client``."""
        from northwind.app import create_app as northwind_app
        from northwind.config import NorthwindConfig

        return northwind_app(NorthwindConfig(
            issuer=self.issuer, credential=self.credential, public_url=f"https://{self.domain}", poppy=self.poppy,
            http_client=http_client, clock=clock, demo_password=NORTHWIND_PASSWORD, ledger_url=self.ledger,
            webhook_secret=self.webhook_secret))


async def onboard_northwind(http: httpx.AsyncClient, dns: TxtZone, *, slug: str, domain: str,
                            login: dict[str, Any] | None = None) -> Onboarded:
    """Northwind signs up and configures its tenant over HTTP, through the console's API, as a company does.

    Sign-up, ``domain`` claimed (its TXT record published in ``dns``) and verified, issuer
    settings (Device and Direct Sign-In through Northwind's login page, or ``login``: an
    OpenID Connect connection; hosted conversations), a resource-server credential, the
    perform webhook and the ``order.place`` kind, and the generated ``poppy.json``.
    """
    api = f"https://{CONSOLE_HOST}/api/v1"
    signup = await _expect(await http.post(f"{api}/signup", json={
        "email": f"owner@{slug}.example.com", "password": "a long onboarding passphrase " + secrets.token_hex(4),
        "organization_name": "Northwind", "slug": slug}), 201)
    auth = {"Authorization": f"Bearer {signup['api_key']}"}
    claim = await _expect(await http.post(f"{api}/domains", json={"domain": domain}, headers=auth), 201)
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    verified = await _expect(await http.post(f"{api}/domains/{domain}/verify", headers=auth), 200)
    assert verified["status"] == "verified", verified
    current = await _expect(await http.get(f"{api}/issuer", headers=auth), 200)
    wanted = dict(current["settings"])
    wanted.update({
        "organization_name": "Northwind",
        "custom_scopes": {"orders:read": "See your orders"},
        # Device and Direct Sign-In through Northwind's login page; the suite uses Device
        # (the driver's approve_authorization serves a company without it).
        "direct": {"enabled": True, "scopes": ["orders:read", "poppy:read"]},
        "device": {"enabled": True, "scopes": ["orders:read", "poppy:read"]},
        # The suite starts many Sessions for one agent within a minute.
        "sessions_per_agent_per_minute": 100_000,
        "login": login or {"url": f"https://{domain}/login", "jwks_uri": f"https://{domain}/.well-known/jwks.json"},
        # Frontdoor hosts the conversation endpoint; Northwind's concierge answers (the webhook below).
        "conversations": {"enabled": True},
        "browser_session_endpoint": f"https://{domain}/poppy/browser",
        "apis": [
            {"type": "openapi", "url": f"https://{domain}/openapi.json", "description": "Orders and products"},
            {"type": "mcp", "url": f"https://{domain}/mcp", "description": "Product search",
             "supports_dpop": True},
        ],
    })
    await _expect(await http.put(f"{api}/issuer", json=wanted, headers=auth), 200)
    credential = await _expect(await http.post(f"{api}/resource-credentials", json={"name": "northwind"},
                                               headers=auth), 201)
    # Operations: Northwind's perform webhook, and the one kind its API proposes. The same
    # endpoint hears of each user message of the hosted conversations (its concierge).
    hook = await _expect(await http.post(f"{api}/webhook-endpoints", headers=auth, json={
        "url": f"https://{domain}/webhooks/frontdoor", "description": "Northwind performs orders",
        "event_types": ["conversation.message.created"]}), 201)
    await _expect(await http.put(f"{api}/operation-kinds/order.place", headers=auth, json={
        "perform_endpoint_id": hook["endpoint"]["id"], "scopes": ["orders:read"],
        "default_expiry_seconds": 900, "max_expiry_seconds": 3600, "description": "Place an order"}), 200)
    document = await _expect(await http.get(f"{api}/domains/{domain}/poppy.json", headers=auth), 200)
    return Onboarded(slug=slug, domain=domain, issuer=signup["tenant"]["issuer"], credential=credential["secret"],
                     poppy=document, webhook_secret=hook["secret"])


async def _expect(response: httpx.Response, status: int) -> Any:
    if response.status_code != status:
        raise RuntimeError(f"harness setup: {response.request.method} {response.request.url.path} answered "
                           f"{response.status_code}: {response.text[:300]}")
    return response.json() if response.content else None


@asynccontextmanager
async def build_context(suites: Sequence[str] = ("security", "protocol"), *,
                        login: Login = "handoff") -> AsyncIterator[ConformanceContext]:
    """The suite's context against a freshly onboarded Northwind on Frontdoor.

    Args:
        suites: informational: the suites the caller means to run (the world is the same).
        login: the tenant's login connection. ``handoff``: Northwind's login page and the
            signed handoff. ``oidc``: a real OpenID Provider started here for the context's
            lifetime (one process on loopback, a ``client_secret_basic`` client registered
            for the tenant's ``{issuer}/oidc/callback``); Frontdoor's outbound fetcher reaches
            it over a real, SSRF-guarded socket (the development policy's loopback ``http``)
            and everything else on the in-process network; its users are the accounts (``sub``).
    """
    import asyncpg
    from frontdoor_console.app import create_app as console_app
    from frontdoor_core.migrations import apply_migrations, discover
    from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
    from frontdoor_core.settings import load_settings
    from frontdoor_issuer.app import create_app as issuer_app
    from frontdoor_ledger.app import create_app as ledger_app
    from frontdoor_tenancy.credentials.key_encryption import generate_kek_value

    del suites
    if login not in ("handoff", "oidc"):
        raise ValueError(f"login is handoff or oidc, not {login!r}")
    slug = f"northwind-{secrets.token_hex(3)}"
    async with AsyncExitStack() as stack:
        servers = await start_servers(f"conf{secrets.token_hex(3)}")
        stack.callback(servers.stop)
        conn = await asyncpg.connect(servers.database_url)
        try:
            await apply_migrations(conn, discover(MIGRATED_PACKAGES))
        finally:
            await conn.close()

        clock = MutableClock(datetime.now(UTC))
        settings = load_settings({
            "FRONTDOOR_ENV": "test",
            "DATABASE_URL": servers.database_url,
            "REDIS_URL": servers.redis_url,
            "FRONTDOOR_KEK": generate_kek_value(),
            "FRONTDOOR_ISSUER_BASE_URL": f"https://{ISSUER_HOST}",
            "FRONTDOOR_CONSOLE_BASE_URL": f"https://{CONSOLE_HOST}",
            "FRONTDOOR_LEDGER_BASE_URL": f"https://{LEDGER_HOST}",
            "FRONTDOOR_LOG_LEVEL": os.environ.get("FRONTDOOR_LOG_LEVEL", "warning"),
            # The in-process network hands a response over once it is complete: a stream ends
            # after its backlog and the agent reconnects with Last-Event-ID, as after a proxy cut.
            "FRONTDOOR_CONVERSATION_STREAM_DURATION": "0s",
        })
        network = InProcessNetwork()
        atlas = AgentIdentity(domain="atlas.example", name="Atlas")
        plain = AgentIdentity(domain="plain.example", name="Plain", extensions=())
        for identity in (atlas, plain):
            network.add(identity.domain, identity.website())
        dns = _StaticTxt()
        network_transport = _NetworkTransport(network)
        stack.push_async_callback(network_transport.aclose)
        idp: OpenIdProvider | None = None
        idp_connection: dict[str, Any] = {}
        if login == "oidc":
            from tests.support.oidc import IdpInternet, OpenIdProvider, new_key

            idp_secret = "idp-secret-" + secrets.token_urlsafe(24)
            idp = OpenIdProvider([{
                "client_id": IDP_CLIENT_ID, "client_secret": idp_secret,
                "token_endpoint_auth_method": "client_secret_basic",
                "redirect_uris": [f"https://{ISSUER_HOST}/{slug}/oidc/callback"],
                "grant_types": ["authorization_code"], "response_types": ["code"]}], new_key("idp-1"),
                clock_control=True)
            stack.callback(idp.stop)
            policy = OutboundPolicy(allow_http_loopback=True)
            internet = IdpInternet(network_transport, policy)
            internet.add(idp)
            outbound = SafeFetcher(policy, transport=internet)
            idp_connection = {"type": "oidc", "issuer": idp.issuer, "client_id": IDP_CLIENT_ID,
                              "client_secret": idp_secret}
        else:
            outbound = SafeFetcher(transport=network_transport)
        console = console_app(settings, clock=clock.now, txt_lookup=dns, fetcher=outbound)
        issuer = issuer_app(settings, clock=clock.now, fetcher=outbound)
        ledger = ledger_app(settings, clock=clock.now, fetcher=outbound)
        await stack.enter_async_context(console.lifespan())
        await stack.enter_async_context(issuer.lifespan())
        await stack.enter_async_context(ledger.lifespan())
        network.add(CONSOLE_HOST, console)
        network.add(ISSUER_HOST, issuer)
        network.add(LEDGER_HOST, ledger)
        http = network.client()
        stack.push_async_callback(http.aclose)

        # --- onboard Northwind the way a company does, over HTTP
        onboarded = await onboard_northwind(http, dns, slug=slug, domain=COMPANY_DOMAIN, login=idp_connection or None)
        company = onboarded.company(network.client(), clock.now)
        await stack.enter_async_context(company.lifespan())
        network.add(COMPANY_DOMAIN, company)

        driver = FrontdoorDriver(clock, plain, network=network, issuer=onboarded.issuer,
                                 credential=onboarded.credential, password=NORTHWIND_PASSWORD,
                                 ledger=onboarded.ledger, company=company, login=login, idp=idp)
        yield ConformanceContext(
            f"https://{COMPANY_DOMAIN}", identity=atlas, http=http, driver=driver,
            scenario=SCENARIO, clock=clock, address_resolver=network.resolve, browser_http=network.client(),
        )
