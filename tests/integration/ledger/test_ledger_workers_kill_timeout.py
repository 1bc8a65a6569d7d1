"""A ledger worker that cannot take SIGTERM does not keep the ledger from stopping.

granian waits for every worker after SIGTERM. A worker still starting when the signal comes
loses it (it runs granian's inherited handler until it installs its own loop's), and granian
then waited for it without end (seen in CI: a two-worker ledger signalled while its second
worker started). The launcher passes ``--workers-kill-timeout``
(`frontdoor_core.serving.WORKERS_KILL_TIMEOUT_S`): past it, such a worker is killed and the
ledger exits. Here a worker is stopped (SIGSTOP) so it cannot take the signal at all.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess

import pytest
from frontdoor_core.serving import WORKERS_KILL_TIMEOUT_S

from tests.support.dns_server import LocalDNS
from tests.support.granian_app import GranianApp, service_env
from tests.support.servers import Servers


async def test_a_worker_that_ignores_sigterm_is_killed_and_the_ledger_exits(
        servers: Servers, dns: LocalDNS, kek_value: str) -> None:
    app = GranianApp("frontdoor_ledger.asgi:app", service_env(servers, dns, kek_value, FRONTDOOR_LEDGER_WORKERS="2"),
                     launcher="frontdoor_ledger.serve")
    try:
        await app.ready(workers=2)
        pids = [int(p) for p in re.findall(r"Spawning worker-\d+ with PID: (\d+)", app.output())]
        assert len(pids) == 2, app.output()
        os.kill(pids[1], signal.SIGSTOP)  # it can take no signal but SIGKILL
        app.terminate()
        try:
            await asyncio.to_thread(app.proc.wait, WORKERS_KILL_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the ledger did not exit after its kill timeout; its log:\n{app.output()}")
        assert "Killing worker-2 after it refused to gracefully stop" in app.output(), app.output()
        with pytest.raises(ProcessLookupError):
            os.kill(pids[1], 0)  # the stopped worker is gone, not left behind
    finally:
        app.close()
