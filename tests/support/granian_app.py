"""One Frontdoor app under granian, in its own process, on the test session's PostgreSQL and Redis.

As the container images run it (``granian --interface asgi ... frontdoor_<service>.asgi:app``),
with the environment the ``settings`` fixture is made of, so rows written through the
in-process apps are the same rows it reads. For what only the real server shows: signals,
shutdown, the lifespan's order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from tests.support.devstack import free_port
from tests.support.dns_server import LocalDNS
from tests.support.eventually import eventually
from tests.support.servers import Servers
from tests.support.settings_env import settings_env

GRANIAN = str(Path(sys.executable).with_name("granian"))


def service_env(servers: Servers, dns: LocalDNS, kek_value: str, **extra: str) -> dict[str, str]:
    """The variables of the ``settings`` fixture (tests/conftest.py), for a child process."""
    return {**os.environ, **settings_env(servers, dns, kek_value), "FRONTDOOR_LOG_LEVEL": "info", **extra}


class GranianApp:
    """``granian ... <target>`` on a free loopback port (one worker, its output kept for failures).

    ``launcher`` (``frontdoor_ledger.serve``) runs ``python -m <launcher> --host 127.0.0.1 --port <port>``
    instead, as the image does: the launcher execs granian with the workers its setting names.
    """

    def __init__(self, target: str, env: dict[str, str], *, launcher: str | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.NamedTemporaryFile(prefix="granian-", suffix=".log", delete=False)  # noqa: SIM115
        argv = ([sys.executable, "-m", launcher, "--host", "127.0.0.1", "--port", str(self.port)] if launcher else
                [GRANIAN, "--interface", "asgi", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
                 target])
        self.proc = subprocess.Popen(argv, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    async def ready(self, timeout: float = 60.0, *, workers: int = 1) -> None:
        """Until ``/readyz`` answers and, with ``workers``, every worker has started.

        One worker answering is not all of them: a SIGTERM that reaches granian while another
        worker is still starting is lost by that worker (it inherits granian's own handler until
        it installs its loop's), and granian then waits for it without end unless its
        ``--workers-kill-timeout`` ends it. A test that signals the server waits for them all.
        """

        async def all_started() -> None:
            self._log.flush()
            log = Path(self._log.name).read_text(errors="replace")
            missing = [n for n in range(1, workers + 1) if f"Started worker-{n}" not in log]
            assert not missing, f"workers not started yet: {missing}"

        async def answers() -> None:
            assert self.proc.poll() is None, self.output()
            try:
                async with httpx.AsyncClient(base_url=self.base, timeout=2) as http:
                    r = await http.get("/readyz")
            except httpx.HTTPError as exc:
                raise AssertionError(str(exc)) from None
            assert r.status_code == 200, r.text

        await eventually(answers, timeout=timeout, interval=0.2)
        if workers > 1:
            await eventually(all_started, timeout=timeout, interval=0.1)

    def terminate(self) -> None:
        """SIGTERM, as Kubernetes sends at a rolling restart."""
        self.proc.send_signal(signal.SIGTERM)

    def output(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-6000:]

    def close(self) -> None:
        """Kill it and its worker if they still run (a failed test), and drop its log."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own process group: granian and its worker
            self.proc.wait(timeout=10)
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)
