"""The peer conformance suite through the replicated stack, over real sockets and TLS (#15 §2).

``make run REPLICAS=2`` (`tests.support.devstack`, as `test_replicas` starts it, on the suite's
embedded PostgreSQL and Redis): two replicas each of the console, the issuer and the ledger
behind HAProxy (round robin, ``/readyz`` checked), two of each dispatcher process, one beat.
The peer suite (``personal-agent-protocol`` 0.26.0) plays a personal agent against it with a
real ``httpx`` client and the system clock; what the in-process harness
(`tests.conformance.harness`) gives it in memory, this module gives it for real:

- names and TLS: `tests.support.tls_front` gives ``issuer.frontdoor.test``,
  ``console.frontdoor.test``, ``ledger.frontdoor.test`` (Frontdoor's base URLs), the agents'
  sites ``atlas.example`` and ``plain.example`` and the company (`COMPANY_DOMAIN`) each a
  loopback address on port 443 with a throwaway CA. TLS for Frontdoor's names ends there and
  the bytes go on to HAProxy's ports; the stack's processes resolve the same names and trust
  the CA through ``tests/support/stack_site`` on their ``PYTHONPATH``, with the names' /24 in
  ``FRONTDOOR_OUTBOUND_ALLOWLIST`` and ``FRONTDOOR_WEBHOOK_ALLOWLIST``;
- DNS TXT for the domain claim: a real nameserver (`tests.support.dns_server`) the console's
  verifier asks (``FRONTDOOR_DNS_NAMESERVERS``);
- the company: Northwind (examples/northwind) in this process under uvicorn over TLS,
  onboarded over HTTP as the harness does (sign-up, the domain verified, settings, a
  credential, the perform webhook, ``poppy.json``); the stack fetches its login JWKS and
  delivers its webhooks through the front like any outbound request;
- the user: the harness's driver, its browser on real sockets, each user dialling from their
  own loopback address (the device page limits code entries per address; HAProxy's
  ``X-Forwarded-For`` names it, ``FRONTDOOR_TRUSTED_PROXIES`` trusting HAProxy only);
- the clock: the system's. The driver has no ``clock`` capability and ``wait`` sleeps, so a
  case that must move time forward is skipped: `REAL_CLOCK_SKIPS` names each, and any other
  skip fails the test.

The module starts its own stack rather than sharing `test_replicas`' (``rs``): Frontdoor's
public base URLs, the names and the CA must be set when the processes start, and that
stack's loopback ``http://`` URLs are ones the suite refuses (it needs an HTTPS company and
issuer). The suites run side by side, each its own agent and users: their device sign-ins
wait the real 5 s poll interval, which one suite after another would take minutes. HAProxy's
counters show both replicas of each service answered the suites.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from frontdoor_devstack.load_balancer import LoadBalancer
from personal_agent_protocol.conformance import ConformanceContext, run_conformance, select_cases
from personal_agent_protocol.demo.kit import PUBLIC_ADDRESS, AgentIdentity, InProcessNetwork, MutableClock
from personal_agent_protocol.errors import DiscoveryError

from tests.conformance.harness import (
    CONSOLE_HOST,
    ISSUER_HOST,
    LEDGER_HOST,
    NORTHWIND_PASSWORD,
    SCENARIO,
    FrontdoorDriver,
    Onboarded,
    onboard_northwind,
)
from tests.support.devstack import SERVICES, Devstack, replicated
from tests.support.dns_server import LocalDNS
from tests.support.servers import Servers
from tests.support.tls_front import TlsFront

TEST_TIMEOUT = 300.0
pytestmark = [pytest.mark.e2e, pytest.mark.conformance, pytest.mark.timeout(TEST_TIMEOUT, func_only=True)]

SUITES = ("security", "protocol", "lifecycle", "operations", "conversations")
#: Cases skipped because the clock is the system's (the driver cannot move it): case -> why.
REAL_CLOCK_SKIPS = {
    "operations.expired": "waits past the proposal's expires_at (15 minutes): needs the injected clock",
}
#: The company's domain: ``make run``'s own demo tenant holds ``northwind.example`` (seeded,
#: verified, served over plain http on loopback), so this tenant claims another.
COMPANY_DOMAIN = "northwind-replicas.example"
HOSTS = {"issuer": ISSUER_HOST, "console": CONSOLE_HOST, "ledger": LEDGER_HOST}


@dataclass
class World:
    run: Devstack
    front: TlsFront
    atlas: AgentIdentity
    plain: AgentIdentity
    slug: str
    issuer: str
    credential: str
    company: Any
    servers: Servers
    baseline: dict[str, int]  # `served` before the company onboarded

    def served(self) -> dict[str, int]:
        """Requests HAProxy has given each replica so far (``issuer-1``: n, ...)."""
        return _served(self.run)

    async def resolve(self, host: str) -> list[str]:
        """The agent's SSRF check sees a public address for the world's names (it dials their loopback one)."""
        if host.lower() not in self.front.hosts:
            raise DiscoveryError("dns_failed", "Could not resolve discovery host")
        return [PUBLIC_ADDRESS]


def _served(run: Devstack) -> dict[str, int]:
    lb = LoadBalancer(run.data_dir / "haproxy.sock")
    return {name.split("/")[1]: int(row["stot"]) for name, row in lb.servers().items()}


class SocketDriver(FrontdoorDriver):
    """The harness's driver on real sockets and the real clock (no ``clock``: `wait` sleeps)."""

    capabilities = FrontdoorDriver.capabilities - {"clock"}

    def __init__(self, world: World, network: InProcessNetwork) -> None:
        super().__init__(MutableClock(), world.plain, network=network, issuer=world.issuer,
                         credential=world.credential, password=NORTHWIND_PASSWORD,
                         ledger=f"https://{LEDGER_HOST}/{world.slug}", company=world.company)
        self.front = world.front

    def _browser_http(self, address: str = "127.0.0.1") -> httpx.AsyncClient:
        # The harness names each user's address 198.18.x.y: here that user dials from 127.18.x.y.
        source = None if address == "127.0.0.1" else "127." + address.split(".", 1)[1]
        return self.front.client(source=source)

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with replicated("repconf") as ground:
        front = TlsFront(ground.data_dir / "tls", proxied={HOSTS[s]: ground.ports[s] for s in SERVICES},
                         served=("atlas.example", "plain.example", COMPANY_DOMAIN))
        atlas = AgentIdentity(domain="atlas.example", name="Atlas")
        plain = AgentIdentity(domain="plain.example", name="Plain", extensions=())
        dns = LocalDNS()
        try:
            front.start()
            dns.start()
            for identity in (atlas, plain):
                front.serve(identity.domain, identity.website())
            run = ground.start({
                **{f"FRONTDOOR_{s.upper()}_BASE_URL": f"https://{HOSTS[s]}" for s in SERVICES},
                "FRONTDOOR_LOG_LEVEL": "warning",
                "FRONTDOOR_OUTBOUND_ALLOWLIST": front.cidr, "FRONTDOOR_WEBHOOK_ALLOWLIST": front.cidr,
                "FRONTDOOR_DNS_NAMESERVERS": ",".join(f"{h}:{p}" for h, p in dns.nameservers),
                "FRONTDOOR_WEBHOOK_RETRY_SCHEDULE": "0s,200ms,500ms,1s,1s,2s,2s,2s",
                **front.stack_env()})
            slug = f"northwind-{secrets.token_hex(3)}"
            baseline = _served(run)
            onboarded = asyncio.run(_onboard(front, dns, slug))
            company = onboarded.company(front.client(), lambda: datetime.now(UTC))
            front.serve(COMPANY_DOMAIN, company, lifespan="on")
            yield World(run, front, atlas, plain, slug, onboarded.issuer, onboarded.credential, company,
                        ground.servers, baseline)
        finally:
            front.stop()
            dns.stop()


async def _onboard(front: TlsFront, dns: LocalDNS, slug: str) -> Onboarded:
    """Northwind onboards as in the harness (`onboard_northwind`), through the TLS front and the load balancer."""
    async with front.client() as http:
        return await onboard_northwind(http, dns, slug=slug, domain=COMPANY_DOMAIN)


def context(world: World) -> ConformanceContext:
    """A fresh context (its clients bound to the calling event loop) on the world's one tenant."""
    network = InProcessNetwork()
    network.socket_transport = world.front.transport()  # the driver's company calls: over sockets too
    return ConformanceContext(
        f"https://{COMPANY_DOMAIN}", identity=world.atlas, http=world.front.client(),
        driver=SocketDriver(world, network), scenario=SCENARIO, clock=None, address_resolver=world.resolve,
        browser_http=world.front.client())


def _verdict(report: Any) -> tuple[list[str], list[str], list[str], list[str]]:
    results = report.results
    passed = [r.id for r in results if r.outcome == "passed"]
    failed = [f"{r.id}: {r.message}" for r in results if r.outcome == "failed"]
    clock_skips = [r.id for r in results if r.outcome == "skipped" and r.id in REAL_CLOCK_SKIPS]
    other_skips = [f"{r.id}: {r.message}" for r in results if r.outcome == "skipped" and r.id not in REAL_CLOCK_SKIPS]
    return passed, failed, clock_skips, other_skips


async def _run(world: World, suites: Sequence[str]) -> dict[str, Any]:
    async def one(suite: str) -> tuple[str, Any, float]:
        cases = select_cases(suites=[suite])
        assert cases, f"the {suite} suite selected no case"
        ctx = context(world)
        t0 = time.monotonic()
        try:
            report = await run_conformance(ctx, cases=cases)
        finally:
            await ctx.http.aclose()
        return suite, report, time.monotonic() - t0

    return {suite: (report, took) for suite, report, took in await asyncio.gather(*(one(s) for s in suites))}


def test_the_peer_suites_pass_through_the_load_balancer(world: World) -> None:
    reports = asyncio.run(_run(world, SUITES))
    lines, problems = [], []
    for suite, (report, took) in reports.items():
        passed, failed, clock_skips, other_skips = _verdict(report)
        lines.append(f"{suite}: {len(passed)} passed, {len(failed)} failed, {len(clock_skips) + len(other_skips)} "
                     f"skipped ({len(clock_skips)} for the real clock: {', '.join(clock_skips) or '-'}) in {took:.0f} s")
        problems += [f"{suite} failed {f}" for f in failed] + [f"{suite} skipped {s}" for s in other_skips]
    print("\nthrough HAProxy, over TLS, the system clock:\n  " + "\n  ".join(lines))
    assert not problems, "\n".join(problems)
    # Both replicas of each service answered: the console the onboarding, the issuer and the
    # ledger the suites (and the company's calls).
    after = world.served()
    answered = {replica: after[replica] - world.baseline[replica] for replica in after}
    print(f"  requests per replica: {answered}")
    assert all(answered[f"{service}-{i}"] > 0 for service in SERVICES for i in (1, 2)), answered
