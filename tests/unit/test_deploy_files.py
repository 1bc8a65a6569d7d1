"""The deployment files agree with each other and with the code.

No Docker engine is needed: these read docker-compose.yml, the Dockerfiles, the migrate
job, deploy/.env.example and .dockerignore, and check what a build or `docker compose up`
would otherwise reveal only at deploy time. Each check is a function returning a list of
problems; the `test_checker_*` cases at the end feed them broken input to show they fail.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from frontdoor_core.migrations import discover
from frontdoor_core.settings import ENV_NAMES, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "deploy" / ".env.example"
MIGRATE_SCRIPT = ROOT / "deploy" / "migrate.py"
MIGRATE_DOCKERFILE = ROOT / "deploy" / "migrate.Dockerfile"

EXPECTED_SERVICES = {"postgres", "redis", "migrate", "console", "issuer", "ledger", "deliverer", "worker", "beat"}
HTTP_SERVICES = {"console": 8000, "issuer": 8001, "ledger": 8002}
# The processes the dispatcher image runs, each its own compose service (and chart Deployment).
DISPATCHER_PROCESSES = {"deliverer", "worker", "beat"}
WORKER_SERVICES = {"dispatcher"}
SERVICE_DOCKERFILES = {name: ROOT / "services" / name / "Dockerfile" for name in [*HTTP_SERVICES, *WORKER_SERVICES]}
ALL_DOCKERFILES = {**SERVICE_DOCKERFILES, "migrate": MIGRATE_DOCKERFILE}

SETTINGS_VARS = frozenset(ENV_NAMES.values())
# Variables Frontdoor does not read but the third-party images or the toolchain do.
EXTERNAL_VAR_PREFIXES = ("POSTGRES_",)
EXTERNAL_VARS = frozenset({"PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"})
DOCKERFILE_VAR_PREFIXES = ("PIP_",)
# Optional services whose image cannot run a probe at all (documented in the compose file).
NO_HEALTHCHECK_OK = {"otel-collector"}
BUILD_TOOLS = re.compile(r"\b(build-essential|gcc|g\+\+|make|clang|[\w.+-]+-dev)\b")
ONE_SHOT_RESTART = {"no", False}


# --- parsing --------------------------------------------------------------------------------


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str | None:
        found = self.all(keyword)
        return found[-1] if found else None


@dataclass
class Dockerfile:
    path: Path
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def external_bases(self) -> list[str]:
        names = {s.name for s in self.stages if s.name}
        return [s.base for s in self.stages if s.base not in names]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for args in self.final.all("ENV"):
            out.update(_env_pairs(args))
        return out


def parse_dockerfile(text: str, path: Path = Path("Dockerfile")) -> Dockerfile:
    """Just enough of the Dockerfile grammar: continuations, comments, ARG, FROM, stages."""
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            parts = [p for p in args.split() if not p.startswith("--")]
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: global_args.get(m.group(1), m.group(0)), parts[0])
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages:
            if keyword == "ARG" and "=" in args:
                key, _, value = args.partition("=")
                global_args[key.strip()] = value.strip().strip('"')
        else:
            stages[-1].instructions.append((keyword, args))
    return Dockerfile(path, global_args, stages)


def _env_pairs(args: str) -> dict[str, str]:
    tokens = shlex.split(args)
    if tokens and "=" not in tokens[0]:  # legacy `ENV KEY value`
        return {tokens[0]: " ".join(tokens[1:])}
    return dict(t.split("=", 1) for t in tokens)


@cache
def dockerfile(path: Path) -> Dockerfile:
    return parse_dockerfile(path.read_text(), path)


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


def _depends_on(svc: dict[str, Any]) -> dict[str, str]:
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def _environment(svc: dict[str, Any]) -> dict[str, str]:
    env = svc.get("environment") or {}
    if isinstance(env, list):
        return dict([*item.split("=", 1), ""][:2] for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _build_dockerfile(svc: dict[str, Any]) -> Path | None:
    build = svc.get("build")
    if build is None:
        return None
    if isinstance(build, str):
        return ROOT / build / "Dockerfile"
    return ROOT / build.get("context", ".") / build.get("dockerfile", "Dockerfile")


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in _strings(k) + _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


_INTERPOLATION = re.compile(r"\$\{([A-Za-z_]\w*)([^}]*)\}|\$([A-Za-z_]\w*)")


def interpolated_names(compose: dict[str, Any]) -> set[str]:
    """Variables compose substitutes from the host environment or `.env` (`$$` is literal)."""
    names: set[str] = set()
    for text in _strings(compose):
        for m in _INTERPOLATION.finditer(text.replace("$$", "")):
            names.add(m.group(1) or m.group(3))
    return names


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR:?error}` against ``env``."""

    def sub(m: re.Match[str]) -> str:
        name, rest = m.group(1) or m.group(3), m.group(2) or ""
        value = env.get(name, "")
        if rest.startswith(":-"):
            return value or rest[2:]
        if rest.startswith(":?") and not value:
            raise KeyError(f"{name}: {rest[2:]}")
        return value

    return _INTERPOLATION.sub(sub, text.replace("$$", "\0")).replace("\0", "$")


def is_known_var(name: str, *, extra_prefixes: tuple[str, ...] = ()) -> bool:
    return name in SETTINGS_VARS or name in EXTERNAL_VARS or name.startswith(EXTERNAL_VAR_PREFIXES + extra_prefixes)


def _normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


@cache
def workspace() -> dict[str, tuple[str, list[str]]]:
    """Distribution name -> (repo-relative path, its frontdoor-* dependencies)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for pyproject in sorted([*ROOT.glob("libs/*/pyproject.toml"), *ROOT.glob("services/*/pyproject.toml")]):
        project = tomllib.loads(pyproject.read_text())["project"]
        deps = [_normalise(re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0]) for d in project.get("dependencies", [])]
        out[_normalise(project["name"])] = (
            str(pyproject.parent.relative_to(ROOT)),
            [d for d in deps if d.startswith("frontdoor-")],
        )
    return out


def closure(dists: list[str]) -> set[str]:
    """Repo paths of ``dists`` and every workspace package they need."""
    ws, seen, todo = workspace(), set(), list(dists)
    while todo:
        dist = todo.pop()
        if dist not in seen:
            seen.add(dist)
            todo.extend(ws[dist][1])
    return {ws[d][0] for d in seen}


def _dist_owning(import_name: str) -> str:
    for dist, (path, _) in workspace().items():
        if (ROOT / path / "src" / import_name).is_dir():
            return dist
    raise AssertionError(f"no workspace package provides {import_name}")


def pip_installs(df: Dockerfile) -> list[list[str]]:
    """Argument lists of every `pip install` in the Dockerfile's RUN lines."""
    out = []
    for stage in df.stages:
        for run in stage.all("RUN"):
            for command in re.split(r"&&|;|\|\|", run):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"] or (words[1:3] == ["-m", "pip"] and "install" in words):
                    out.append(words[words.index("install") + 1:])
    return out


@cache
def migrate_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("frontdoor_deploy_migrate", MIGRATE_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- checks: each returns a list of problems --------------------------------------------------


def dockerfile_problems(df: Dockerfile) -> list[str]:
    problems: list[str] = []
    if not df.stages:
        return [f"{df.path}: no FROM"]
    for base in df.external_bases():
        image, _, digest = base.partition("@")
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        if "$" in base:
            problems.append(f"{df.path}: base image {base!r} uses an ARG without a default")
        elif not digest.startswith("sha256:") and (not tag or tag == "latest" or not re.search(r"\d+\.\d+\.\d+", tag)):
            problems.append(f"{df.path}: base image {base!r} is not pinned (full X.Y.Z tag or @sha256 digest)")
    user = df.final.last("USER")
    if user is None:
        problems.append(f"{df.path}: final stage has no USER (it would run as root)")
    elif user.split(":")[0] in {"root", "0"}:
        problems.append(f"{df.path}: final stage runs as {user!r}")
    for run in df.final.all("RUN"):
        if ("apt-get install" in run or "apk add" in run) and BUILD_TOOLS.search(run):
            problems.append(f"{df.path}: final stage installs build tools: {run!r}")
        if re.search(r"\bpip\b.*\binstall\b", run):
            problems.append(f"{df.path}: final stage runs pip install (copy the build stage's venv instead)")
    for args in pip_installs(df):
        if "-c" not in args or args[args.index("-c") + 1] != "requirements/constraints.txt":
            problems.append(f"{df.path}: pip install without -c requirements/constraints.txt: {args}")
        if {"-e", "--editable"} & set(args):
            problems.append(f"{df.path}: editable install in an image: {args}")
    for key in df.env():
        if not is_known_var(key, extra_prefixes=DOCKERFILE_VAR_PREFIXES):
            problems.append(f"{df.path}: ENV {key} is not a Frontdoor setting")
    return problems


def installed_paths(df: Dockerfile) -> set[str]:
    return {a.rstrip("/") for args in pip_installs(df) for a in args if re.match(r"^(libs|services|tools)/", a)}


def depends_on_problems(compose: dict[str, Any]) -> list[str]:
    services = compose["services"]
    problems = []
    for name, svc in services.items():
        for dep, condition in _depends_on(svc).items():
            if dep not in services:
                problems.append(f"{name} depends on unknown service {dep!r}")
                continue
            if condition == "service_healthy" and not has_healthcheck(services[dep]):
                problems.append(f"{name} waits for {dep} to be healthy but {dep} has no healthcheck")
            elif condition == "service_completed_successfully" and not is_one_shot(services[dep]):
                problems.append(f"{name} waits for {dep} to complete but {dep} is not one-shot (restart: 'no')")
            elif condition not in {"service_started", "service_healthy", "service_completed_successfully"}:
                problems.append(f"{name}: unknown depends_on condition {condition!r}")
    return problems


def is_one_shot(svc: dict[str, Any]) -> bool:
    """Explicitly `restart: "no"` (compose's default, so only the explicit form counts)."""
    return "restart" in svc and svc["restart"] in ONE_SHOT_RESTART and "healthcheck" not in svc


def has_healthcheck(svc: dict[str, Any]) -> bool:
    hc = svc.get("healthcheck")
    if hc is not None:
        return not hc.get("disable") and bool(hc.get("test")) and hc.get("test") != ["NONE"]
    path = _build_dockerfile(svc)
    if path is None or not path.is_file() or "command" in svc or "entrypoint" in svc:
        return False  # an overridden command makes the image's probe meaningless
    image_hc = dockerfile(path).final.last("HEALTHCHECK")
    return image_hc is not None and image_hc.upper() != "NONE"


def healthcheck_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in compose["services"].items():
        if name in NO_HEALTHCHECK_OK and svc.get("profiles"):
            continue
        if not has_healthcheck(svc) and not is_one_shot(svc):
            problems.append(f"{name} has no healthcheck and is not one-shot")
    return problems


def port_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in compose["services"].items():
        for port in svc.get("ports") or []:
            if isinstance(port, dict):
                ok = port.get("host_ip") == "127.0.0.1" or "published" not in port
            else:
                ok = str(port).startswith("127.0.0.1:") and str(port).count(":") == 2
            if not ok:
                problems.append(f"{name} publishes {port!r} beyond 127.0.0.1")
    return problems


def build_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in compose["services"].items():
        if "build" not in svc and "image" not in svc:
            problems.append(f"{name} has neither build nor image")
        path = _build_dockerfile(svc)
        if path is not None and not path.is_file():
            problems.append(f"{name} builds from missing {path.relative_to(ROOT)}")
        image = svc.get("image", "")
        if "build" not in svc and (":" not in image or image.endswith(":latest")):
            problems.append(f"{name}: image {image!r} has no version tag")
    return problems


def env_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, svc in compose["services"].items():
        for key in _environment(svc):
            if not is_known_var(key):
                problems.append(f"{name}: environment {key} is neither a Frontdoor setting nor a known external")
    for var in sorted(interpolated_names(compose)):
        if not is_known_var(var):
            problems.append(f"${{{var}}} is neither a Frontdoor setting nor a known external")
    return problems


def volume_problems(compose: dict[str, Any]) -> list[str]:
    declared = set(compose.get("volumes") or {})
    problems = []
    for name, svc in compose["services"].items():
        for vol in svc.get("volumes") or []:
            source = vol.get("source", "") if isinstance(vol, dict) else str(vol).split(":")[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{name} mounts missing {source}")
            elif source not in declared:
                problems.append(f"{name} uses undeclared volume {source!r}")
    return problems


def env_example_vars() -> dict[str, str]:
    out = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = re.match(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$", line.strip())
        if m:
            out.setdefault(m.group(1), m.group(2))
    return out


# --- the real files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def test_compose_has_the_expected_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) >= EXPECTED_SERVICES


@pytest.mark.parametrize(
    "check", [depends_on_problems, healthcheck_problems, port_problems, build_problems, env_problems, volume_problems]
)
def test_compose_structure(compose: dict[str, Any], check: Any) -> None:
    assert check(compose) == []


def app_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Compose services built from a services/*/Dockerfile."""
    return {
        name: svc for name, svc in compose["services"].items()
        if (p := _build_dockerfile(svc)) is not None and p in SERVICE_DOCKERFILES.values()
    }


def test_every_service_image_is_used_and_apps_wait_for_migrations(compose: dict[str, Any]) -> None:
    apps = app_services(compose)
    assert {_build_dockerfile(s) for s in apps.values()} == set(SERVICE_DOCKERFILES.values())
    for name, svc in apps.items():
        deps = _depends_on(svc)
        assert deps.get("migrate") == "service_completed_successfully", name
        assert deps.get("postgres") == "service_healthy", name
        assert deps.get("redis") == "service_healthy", name
    assert _depends_on(compose["services"]["migrate"]) == {"postgres": "service_healthy"}
    assert _build_dockerfile(compose["services"]["migrate"]) == MIGRATE_DOCKERFILE


def test_http_services_publish_their_port_on_loopback(compose: dict[str, Any]) -> None:
    for name, port in HTTP_SERVICES.items():
        assert compose["services"][name]["ports"] == [f"127.0.0.1:{port}:{port}"]


def test_deliverer_worker_and_beat_share_the_dispatcher_image(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker, beat, deliverer = services["worker"], services["beat"], services["deliverer"]
    assert {n for n, s in app_services(compose).items()
            if _build_dockerfile(s) == SERVICE_DOCKERFILES["dispatcher"]} == DISPATCHER_PROCESSES
    assert _build_dockerfile(worker) == _build_dockerfile(beat) == _build_dockerfile(deliverer) == SERVICE_DOCKERFILES["dispatcher"]
    assert worker.get("image") == beat.get("image") == deliverer.get("image")
    assert "command" not in worker  # the image's default: the worker
    assert beat["command"] == ["celery", "-A", "frontdoor_dispatcher.celery_app", "beat"]
    assert deliverer["command"] == ["python", "-m", "frontdoor_dispatcher.deliverer"]
    assert (ROOT / "services/dispatcher/src/frontdoor_dispatcher/deliverer.py").is_file()
    assert not beat.get("scale") and not (beat.get("deploy") or {}).get("replicas"), "never more than one beat"


def test_one_replica_of_each_service(compose: dict[str, Any]) -> None:
    # The chart's topology at its smallest; scaling is `--scale worker=N` (never beat).
    for name, svc in compose["services"].items():
        assert svc.get("scale", 1) == 1 and (svc.get("deploy") or {}).get("replicas", 1) == 1, name


def data_dir_problems(compose: dict[str, Any]) -> list[str]:
    """A read-only service whose healthcheck reads FRONTDOOR_DATA_DIR needs that directory writable."""
    problems = []
    for name, svc in compose["services"].items():
        hc = " ".join(_strings((svc.get("healthcheck") or {}).get("test", [])))
        if not svc.get("read_only") or "FRONTDOOR_DATA_DIR" not in hc:
            continue
        path = _build_dockerfile(svc)
        data_dir = dockerfile(path).env().get("FRONTDOOR_DATA_DIR", "") if path and path.is_file() else ""
        targets = {str(v).split(":")[1] if ":" in str(v) else str(v) for v in svc.get("volumes") or []}
        targets |= {str(t).split(":")[0] for t in svc.get("tmpfs") or []}
        if not data_dir or data_dir not in targets:
            problems.append(f"{name} is read-only and its healthcheck reads {data_dir or 'FRONTDOOR_DATA_DIR'}, "
                            "which no volume or tmpfs makes writable")
    return problems


def test_every_frontdoor_service_may_stop_gracefully(compose: dict[str, Any]) -> None:
    """Compose's stop grace covers the launcher's worker kill timeout and a webhook's timeout."""
    from frontdoor_core.serving import WORKERS_KILL_TIMEOUT_S

    short = {}
    for name, svc in compose["services"].items():
        if name in {"postgres", "redis", "migrate", "otel-collector"}:
            continue
        grace = str(svc.get("stop_grace_period", "10s"))
        assert grace.endswith("s") and grace[:-1].isdigit(), (name, grace)
        if int(grace[:-1]) <= max(WORKERS_KILL_TIMEOUT_S, 15):
            short[name] = grace
    assert short == {}


def test_read_only_services_can_write_their_data_dir(compose: dict[str, Any]) -> None:
    assert data_dir_problems(compose) == []
    broken = {"services": {"deliverer": {**compose["services"]["deliverer"], "tmpfs": ["/tmp"]}}}
    assert data_dir_problems(broken), "the check must notice a deliverer that cannot write its heartbeat"


def test_no_reserved_placeholders_for_services_that_exist() -> None:
    # A commented-out service block for something that now exists is drift (issue #14).
    text = COMPOSE_FILE.read_text()
    for name in sorted(HTTP_SERVICES):
        assert not re.search(rf"^\s*#\s*{name}:\s*$", text, re.MULTILINE), f"commented-out {name} block"


def test_kek_is_required_and_never_defaulted(compose: dict[str, Any]) -> None:
    for name, svc in app_services(compose).items():
        assert re.fullmatch(r"\$\{FRONTDOOR_KEK:\?[^}]+\}", _environment(svc).get("FRONTDOOR_KEK", "")), name


def test_compose_defaults_are_valid_settings(compose: dict[str, Any]) -> None:
    # What each app sees with only FRONTDOOR_KEK set: the image's ENV, then compose's.
    host = {"FRONTDOOR_KEK": "test-kek"}
    services = compose["services"]
    for name, svc in app_services(compose).items():
        env = dockerfile(_build_dockerfile(svc)).env()
        env.update({k: interpolate(v, host) for k, v in _environment(svc).items()})
        settings = load_settings(env)
        assert settings.env == "dev", name
        assert urlsplit(settings.database_url).hostname in services, name
        assert urlsplit(settings.redis_url).hostname in services, name
        # The same container in production mode insists on https:// public URLs.
        with pytest.raises(SettingsError):
            load_settings({**env, "FRONTDOOR_ENV": "production"})
    with pytest.raises(KeyError):
        interpolate(_environment(next(iter(app_services(compose).values())))["FRONTDOOR_KEK"], {})


def test_env_example_documents_every_variable(compose: dict[str, Any]) -> None:
    documented = env_example_vars()
    assert [v for v in documented if not is_known_var(v)] == []
    assert sorted(interpolated_names(compose) - set(documented)) == []
    assert documented["FRONTDOOR_KEK"] == "", "never ship a key in the example"


@pytest.mark.parametrize("name", sorted(ALL_DOCKERFILES))
def test_dockerfile_basics(name: str) -> None:
    df = dockerfile(ALL_DOCKERFILES[name])
    assert dockerfile_problems(df) == []
    assert len(df.stages) >= 2, "multi-stage: build, then a runtime without build tools"
    assert all(b.startswith("python:3.11.") and "-slim" in b for b in df.external_bases())
    copies = [c for c in df.final.all("COPY") if c.startswith("--from=")]
    assert copies, "the runtime stage copies the build stage's virtualenv"


@pytest.mark.parametrize("name", sorted(SERVICE_DOCKERFILES))
def test_service_image_installs_exactly_what_its_pyproject_needs(name: str) -> None:
    df = dockerfile(SERVICE_DOCKERFILES[name])
    assert installed_paths(df) == closure([f"frontdoor-{name}"])


@pytest.mark.parametrize("name", sorted(HTTP_SERVICES))
def test_http_service_command_port_and_probe(name: str) -> None:
    port = HTTP_SERVICES[name]
    final = dockerfile(SERVICE_DOCKERFILES[name]).final
    # The issuer's and the ledger's launchers exec granian with FRONTDOOR_ISSUER_WORKERS /
    # FRONTDOOR_LEDGER_WORKERS workers (frontdoor_issuer.serve, frontdoor_ledger.serve).
    expected = (["python", "-m", f"frontdoor_{name}.serve", "--host", "0.0.0.0", "--port", str(port)]
                if name in ("issuer", "ledger") else
                ["granian", "--interface", "asgi", "--host", "0.0.0.0", "--port", str(port), f"frontdoor_{name}.asgi:app"])
    assert json.loads(final.last("CMD") or "null") == expected
    assert final.last("EXPOSE") == str(port)
    assert f"http://127.0.0.1:{port}/healthz" in (final.last("HEALTHCHECK") or "")
    assert (ROOT / "services" / name / "src" / f"frontdoor_{name}" / "asgi.py").is_file()


def test_dispatcher_command_and_probe() -> None:
    final = dockerfile(SERVICE_DOCKERFILES["dispatcher"]).final
    assert json.loads(final.last("CMD") or "null") == ["celery", "-A", "frontdoor_dispatcher.celery_app", "worker"]
    assert "inspect ping" in (final.last("HEALTHCHECK") or "")
    assert (ROOT / "services/dispatcher/src/frontdoor_dispatcher/celery_app.py").is_file()


def test_migrate_job_covers_every_package_with_migrations() -> None:
    with_migrations = {
        p.parent.parent.name
        for p in [*ROOT.glob("libs/*/src/*/migrations/*.sql"), *ROOT.glob("services/*/src/*/migrations/*.sql")]
    }
    packages = migrate_module().MIGRATED_PACKAGES
    assert sorted(packages) == sorted(with_migrations)
    assert discover(packages), "the listed packages ship migrations"
    df = dockerfile(MIGRATE_DOCKERFILE)
    assert installed_paths(df) == closure([_dist_owning(p) for p in packages])
    assert "deploy/migrate.py /opt/frontdoor/migrate.py" in df.final.all("COPY")
    assert json.loads(df.final.last("CMD") or "null") == ["python", "/opt/frontdoor/migrate.py"]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Enough of .dockerignore matching for the paths the Dockerfiles copy."""
    ignored = False
    prefixes = [str(Path(*Path(path).parts[: i + 1])) for i in range(len(Path(path).parts))]
    for pattern in patterns:
        negate, pat = pattern.startswith("!"), pattern.lstrip("!").strip("/")
        hit = any(fnmatch.fnmatch(p, pat) or (pat.startswith("**/") and fnmatch.fnmatch(Path(p).name, pat[3:]))
                  for p in prefixes)
        if hit:
            ignored = not negate
    return ignored


def test_dockerignore_keeps_secrets_out_and_what_images_copy_in() -> None:
    patterns = [
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in [".venv", ".data", ".git", ".env", "deploy/.env", "libs/core/src/x/__pycache__", "tests"]:
        assert _ignored(path, patterns), path
    for df in ALL_DOCKERFILES.values():
        for stage in dockerfile(df).stages:
            for copy in stage.all("COPY"):
                if copy.startswith("--from="):
                    continue
                for source in shlex.split(copy)[:-1]:
                    assert (ROOT / source).exists(), f"{df}: COPY {source} does not exist"
                    assert not _ignored(source, patterns), f"{df}: COPY {source} is excluded by .dockerignore"


# --- the checkers fail on broken input --------------------------------------------------------


def _compose(**services: dict[str, Any]) -> dict[str, Any]:
    base = {
        "db": {"image": "postgres:16", "healthcheck": {"test": ["CMD", "pg_isready"]}},
        "job": {"image": "busybox:1.36", "restart": "no"},
    }
    return {"services": {**base, **services}, "volumes": {"data": None}}


@pytest.mark.parametrize(
    ("check", "service", "problem"),
    [
        (port_problems, {"image": "x:1", "ports": ["8000:8000"]}, "publishes"),
        (port_problems, {"image": "x:1", "ports": ["0.0.0.0:8000:8000"]}, "publishes"),
        (port_problems, {"image": "x:1", "ports": [{"target": 80, "published": 8080}]}, "publishes"),
        (depends_on_problems, {"image": "x:1", "depends_on": ["nosuch"]}, "unknown service"),
        (depends_on_problems, {"image": "x:1", "depends_on": {"job": {"condition": "service_healthy"}}}, "no healthcheck"),
        (depends_on_problems, {"image": "x:1", "depends_on": {"db": {"condition": "service_completed_successfully"}}},
         "not one-shot"),
        (healthcheck_problems, {"image": "x:1", "restart": "always"}, "no healthcheck"),
        (healthcheck_problems, {"image": "x:1", "healthcheck": {"disable": True}}, "no healthcheck"),
        (healthcheck_problems, {"build": {"context": ".", "dockerfile": "services/dispatcher/Dockerfile"},
                                "command": ["celery", "beat"]}, "no healthcheck"),
        (env_problems, {"image": "x:1", "environment": {"FRONTDOOR_ISUER_BASE_URL": "https://x"}}, "FRONTDOOR_ISUER"),
        (env_problems, {"image": "x:1", "environment": ["DATABASE_URL=${DATABSE_URL}"]}, "DATABSE_URL"),
        (build_problems, {"build": {"context": ".", "dockerfile": "services/nosuch/Dockerfile"}}, "missing"),
        (build_problems, {"image": "redis:latest"}, "no version tag"),
        (volume_problems, {"image": "x:1", "volumes": ["undeclared:/data"]}, "undeclared"),
    ],
)
def test_checker_catches(check: Any, service: dict[str, Any], problem: str) -> None:
    problems = check(_compose(svc=service))
    assert problems and all(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("FROM python:3.11-slim\nUSER 1000\n", "not pinned"),
        ("FROM python:latest\nUSER 1000\n", "not pinned"),
        ("ARG IMG\nFROM $IMG\nUSER 1000\n", "ARG without a default"),
        ("FROM python:3.11.14-slim\nRUN true\n", "no USER"),
        ("FROM python:3.11.14-slim\nUSER root\n", "runs as 'root'"),
        ("FROM python:3.11.14-slim\nUSER 0:0\n", "runs as '0:0'"),
        ("FROM python:3.11.14-slim\nRUN apt-get update && apt-get install -y \\\n  gcc\nUSER 1000\n", "build tools"),
        ("FROM python:3.11.14-slim AS b\nRUN pip install libs/core\nFROM b\nUSER 1000\n", "without -c"),
        ("FROM python:3.11.14-slim\nRUN pip install -c requirements/constraints.txt -e libs/core\nUSER 1000\n",
         "editable"),
        ("FROM python:3.11.14-slim\nENV FRONTDOOR_KEY=x\nUSER 1000\n", "not a Frontdoor setting"),
    ],
)
def test_checker_catches_dockerfile(text: str, problem: str) -> None:
    problems = dockerfile_problems(parse_dockerfile(text))
    assert any(problem in p for p in problems), problems


def test_parser_resolves_global_args_and_stages() -> None:
    df = parse_dockerfile(
        "ARG IMG=python:3.11.14-slim-bookworm\nFROM ${IMG} AS build\nRUN x\nFROM $IMG AS runtime\n"
        "COPY --from=build /a /a\nUSER 10001:10001\n"
    )
    assert df.external_bases() == ["python:3.11.14-slim-bookworm"] * 2
    assert [s.name for s in df.stages] == ["build", "runtime"]
    assert dockerfile_problems(df) == []
