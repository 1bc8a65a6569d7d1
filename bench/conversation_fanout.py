"""Hosted conversations: a company reply fanned out to 1,000 long-polling agents on one ledger
process, beside an empty round trip to the same ledger measured in the same run.

Stack: embedded PostgreSQL and Redis, the issuer and the ledger each under granian (one
worker), one tenant with hosted conversations on (no webhook: the company answers through
its API). Before the timed window each of ``--agents`` users gets a signed-out Session and
a conversation; then every agent long-polls its conversation
(``GET .../events?cursor=<last>&wait=30``), all at once, each on its own connection. Once
they all wait, the company replies to every conversation through
``POST {ledger}/{slug}/v1/conversations/{id}/messages`` at ``--rate`` replies per second.
For each conversation the fan-out latency is the time from sending the reply to the agent
holding the answer of its long poll with that reply in it (woken through Redis, not at the
end of the wait).

Baseline: ``GET /healthz`` of the same ledger from the same client (one round trip).
Agents come from many networks, as in production: the ledger trusts the loopback proxy's
``X-Forwarded-For`` (``FRONTDOOR_TRUSTED_PROXIES``) and each agent names its own address,
so the per-network limit (3,000 requests a minute) applies per agent.

    python bench/conversation_fanout.py [--agents 1000] [--rate 50] [--quick]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import contextlib
import json
import subprocess
import time
import urllib.request
from typing import Any

from bench._common import FORM_HEADERS, Agent, CpuMeter, Stack, free_port, install_signal_handlers, stop_process_group
from bench._common import summarize as summarize_seconds

WAIT_SECONDS = 30
POLLS_PER_CLIENT = 32
"""Long polls per load-generator client (each client's pool is scanned per request)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=1000, help="concurrent long-polling agents")
    p.add_argument("--rate", type=float, default=50.0, help="company replies per second")
    p.add_argument("--quick", action="store_true", help="100 agents")
    return p.parse_args(argv)


def start_ledger(stack: Stack, ledger_url: str) -> subprocess.Popen[bytes]:
    granian = str(Path(sys.executable).with_name("granian"))
    log = open(stack.root / "ledger.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [granian, "--interface", "asgi", "--host", "127.0.0.1", "--port", ledger_url.rsplit(":", 1)[1],
         "--workers", "1", "--no-ws", "--backlog", "2048", "frontdoor_ledger.asgi:app"],
        env={**stack.issuer_env(), "FRONTDOOR_LEDGER_BASE_URL": ledger_url,
             "FRONTDOOR_TRUSTED_PROXIES": "127.0.0.1/32"},
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{ledger_url}/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    stop_process_group(proc)
    raise RuntimeError("the ledger did not start:\n" + (stack.root / "ledger.log").read_text()[-2000:])


async def enable_conversations(stack: Stack) -> None:
    import msgspec
    from frontdoor_core.db import create_pool
    from frontdoor_tenancy import issuer_settings

    assert stack.tenant is not None
    pool = await create_pool(stack.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            stored = await issuer_settings.get_settings(conn, stack.tenant.id)
            wanted = msgspec.structs.replace(stored.settings, conversations=issuer_settings.HostedConversations(
                enabled=True))
            await issuer_settings.update_settings(conn, stack.tenant.id, issuer_settings.validate_settings(
                wanted, dev=True), if_version=stored.version)
    finally:
        await pool.close()


def _address(n: int) -> str:
    return "198.18.{}.{}".format(*divmod(n % 65536, 256))


def _error(r: Any) -> str:
    """The ``error`` of a refusal's JSON body, to tell refusals apart in the report."""
    try:
        return str(r.json().get("error", ""))
    except ValueError:
        return ""


async def measure(stack: Stack, agent: Agent, ledger_url: str, credential: str, args: argparse.Namespace,
                  ledger_pid: int | None) -> dict[str, Any]:
    import httpx

    assert stack.tenant is not None
    slug, issuer = stack.tenant.slug, stack.tenant.issuer
    endpoint = f"{ledger_url}/{slug}/conversations"
    company = {"Authorization": f"Bearer {credential}"}
    timeout = httpx.Timeout(WAIT_SECONDS + 30, connect=120)
    # The agents' long polls are spread over many small clients, the company's replies have a
    # client of their own: one httpx pool of 1,000 connections costs the load generator a scan
    # of every connection per request (tens of ms of its CPU per reply), which then measured
    # the load generator, not the ledger.
    poller_limits = httpx.Limits(max_connections=POLLS_PER_CLIENT + 4, max_keepalive_connections=POLLS_PER_CLIENT + 4)
    async with contextlib.AsyncExitStack() as clients:
        http = await clients.enter_async_context(httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(
            max_connections=64, max_keepalive_connections=64)))
        pollers = [await clients.enter_async_context(httpx.AsyncClient(timeout=timeout, limits=poller_limits))
                   for _ in range(-(-args.agents // POLLS_PER_CLIENT))]
        # Before the window: a Session and a conversation per agent (a few at a time).
        prepared: list[tuple[str, str, str, dict[str, str]]] = []
        gate = asyncio.Semaphore(16)

        async def prepare(i: int) -> None:
            async with gate:
                body, headers = agent.token_request(issuer, f"fanout-user-{i}")
                r = await http.post(f"{issuer}/oauth/token", content=body, headers={**FORM_HEADERS, **headers})
                r.raise_for_status()
                token = r.json()["access_token"]
                net = {"X-Forwarded-For": _address(i)}
                started = await http.post(endpoint, headers={
                    "Authorization": f"DPoP {token}", "DPoP": agent.dpop("POST", endpoint, token=token),
                    "Content-Type": "application/json", **net},
                    content=json.dumps({"message": {"id": f"m{i}", "sender": "agent", "text": "Hello?"}}).encode())
                started.raise_for_status()
                cid = started.json()["conversation_id"]
                events = f"{endpoint}/{cid}/events"
                first = await http.get(events, headers={"Authorization": f"DPoP {token}",
                                                        "DPoP": agent.dpop("GET", events, token=token), **net})
                first.raise_for_status()
                prepared.append((cid, token, first.json()["cursor"], net))

        t_prepare = time.perf_counter()
        await asyncio.gather(*(prepare(i) for i in range(args.agents)))
        print(f"{args.agents} Sessions and conversations prepared in {time.perf_counter() - t_prepare:.0f} s")
        # Baseline: an empty round trip to the same ledger, same client.
        empty = []
        for _ in range(200):
            t0 = time.perf_counter()
            (await http.get(f"{ledger_url}/healthz")).raise_for_status()
            empty.append(time.perf_counter() - t0)

        sent_at: dict[str, float] = {}
        latencies: list[float] = []
        outcomes: dict[str, int] = {}

        async def poll(client: httpx.AsyncClient, cid: str, token: str, cursor: str, net: dict[str, str]) -> None:
            """Long-poll until the reply is in (a wait that ends empty is polled again, as agents do)."""
            url = f"{endpoint}/{cid}/events"
            while True:
                try:
                    r = await client.get(url, params={"cursor": cursor, "wait": str(WAIT_SECONDS)}, headers={
                        "Authorization": f"DPoP {token}", "DPoP": agent.dpop("GET", url, token=token), **net})
                except httpx.TimeoutException:  # no answer 30 s past the wait: the ledger is saturated
                    outcomes["client timeout"] = outcomes.get("client timeout", 0) + 1
                    continue
                got = time.perf_counter()
                replied = r.status_code == 200 and any(
                    e["type"] == "message" and e["message"].get("role") == "company" for e in r.json()["events"])
                key = "replied" if replied else "empty" if r.status_code == 200 else (
                    f"http {r.status_code} {_error(r)}")
                outcomes[key] = outcomes.get(key, 0) + 1
                if replied and cid in sent_at:
                    latencies.append(got - sent_at[cid])
                if r.status_code == 503:  # temporarily unavailable: retry as agents do, after Retry-After
                    await asyncio.sleep(min(float(r.headers.get("retry-after", "1")), 5.0))
                    continue
                if replied or r.status_code != 200:
                    return
                cursor = r.json()["cursor"]

        meter = CpuMeter({"ledger (granian)": ledger_pid, "postgres": stack.pids["postgres"],
                          "redis": stack.pids["redis"]})
        # The long polls connect a few at a time (a listen queue drops a burst of 1,000 SYNs),
        # then all of them wait: they answer only when woken.
        polls = []
        for n, item in enumerate(prepared):
            polls.append(asyncio.create_task(poll(pollers[n % len(pollers)], *item)))
            await asyncio.sleep(0.005)
        await asyncio.sleep(5.0)
        waiting = sum(not t.done() for t in polls)
        meter.start()
        start = time.perf_counter()
        interval = 1.0 / args.rate
        replies: list[asyncio.Task[Any]] = []
        reply_round_trips: list[float] = []

        async def reply(cid: str) -> None:
            t0 = time.perf_counter()
            sent_at[cid] = t0
            r = await http.post(f"{ledger_url}/{slug}/v1/conversations/{cid}/messages", headers=company,
                                json={"message": {"id": f"re_{cid}", "text": "Your parcel left today."}})
            r.raise_for_status()
            reply_round_trips.append(time.perf_counter() - t0)

        for n, (cid, _, _, _) in enumerate(prepared):
            delay = start + n * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            replies.append(asyncio.create_task(reply(cid)))
        await asyncio.gather(*replies)
        await asyncio.gather(*polls)
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
    return {"fanout": summarize_seconds(latencies), "empty_round_trip": summarize_seconds(empty),
            "reply_round_trip": summarize_seconds(reply_round_trips), "agents": args.agents,
            "waiting": waiting, "woken": len(latencies), "outcomes": outcomes, "rate": args.rate,
            "achieved_rate": args.agents / elapsed,
            "cpu_ms_per_reply": {k: 1000 * v / args.agents for k, v in cpu.items()},
            "other_cpus": cpu.get("other processes", 0.0) / elapsed}


def report(result: dict[str, Any]) -> bool:
    f, e, r = result["fanout"], result["empty_round_trip"], result["reply_round_trip"]
    print(f"{result['waiting']}/{result['agents']} agents long-polling when the replies began")
    print(f"company reply → agent woken  {f.line()}")
    print(f"company reply round trip     {r.line()}")
    print(f"empty round trip (healthz)   {e.line()}")
    print(f"ratio p50 {f.p50_ms / e.p50_ms:.1f}x, p99 {f.p99_ms / e.p99_ms:.1f}x (fan-out / empty round trip)")
    cpu = dict(result["cpu_ms_per_reply"])
    cpu.pop("other processes", None)
    print("CPU per reply: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cpu.items()))
    if result["other_cpus"] > 0.1:
        print(f"NOTE: other processes kept {result['other_cpus']:.2f} CPUs busy during the window: figures are noisy")
    print(f"replies at {result['achieved_rate']:.1f}/s (asked {result['rate']:.0f}); poll answers {result['outcomes']}")
    ok = result["woken"] == result["agents"] == result["waiting"]
    print(f"every agent woken with its reply: {'yes' if ok else 'NO'}")
    return ok


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.quick:
        args.agents = min(args.agents, 100)
    install_signal_handlers()
    with Stack() as stack:
        asyncio.run(stack.create_tenant())
        asyncio.run(enable_conversations(stack))
        assert stack.agent_host is not None
        agent = stack.agent_host.publish(Agent(stack.agent_host.base_url))
        stack.start_issuer(timeout=120.0)  # the machine may be loaded
        ledger_url = f"http://127.0.0.1:{free_port()}"
        ledger = start_ledger(stack, ledger_url)
        try:
            credential = asyncio.run(stack.resource_credential())
            result = asyncio.run(measure(stack, agent, ledger_url, credential, args, ledger.pid))
        finally:
            stop_process_group(ledger)
    result["ok"] = report(result)
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
