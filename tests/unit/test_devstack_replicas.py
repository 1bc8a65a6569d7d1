"""``make run REPLICAS=N`` (issue #15 §2): the process table multiplied, and HAProxy's configuration."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from frontdoor_core.settings import load_settings
from frontdoor_devstack.load_balancer import Backend, haproxy_config
from frontdoor_devstack.processes import expand, replica_count
from frontdoor_devstack.run import process_table, replica_env_defaults


def test_one_replica_keeps_the_names_and_ports() -> None:
    settings = load_settings({})
    table = expand(process_table(settings), 1)
    assert [(r.name, r.port) for r in table if r.port] == [
        ("console", settings.console_port), ("issuer", settings.issuer_port), ("ledger", settings.ledger_port)]
    assert all("{port}" not in " ".join(r.argv) and "{replica}" not in " ".join(r.argv) for r in table)


def test_two_replicas_of_each_service_and_one_beat() -> None:
    settings = load_settings({})
    table = expand(process_table(settings), 2)
    names = [r.name for r in table]
    for kind in ("console", "issuer", "ledger"):
        replicas = [r for r in table if r.kind == kind]
        assert [r.name for r in replicas] == [f"{kind}-1", f"{kind}-2"]
        ports = {r.port for r in replicas}
        assert len(ports) == 2 and getattr(settings, f"{kind}_port") not in ports  # the LB has that one
        assert all(str(r.port) in r.argv for r in replicas)
    assert names.count("beat") == 1 and not any(n.startswith("beat-") for n in names)
    delivery = [r for r in table if r.kind not in ("console", "issuer", "ledger", "beat") and r.index == 2]
    assert delivery, "the dispatcher's delivery processes are replicated too"



def test_replicas_run_one_issuer_and_one_ledger_worker_each_behind_a_trusted_loopback() -> None:
    env: dict[str, str] = {}
    replica_env_defaults(env)
    settings = load_settings(env)
    assert (settings.issuer_workers, settings.ledger_workers) == (1, 1)
    assert env["FRONTDOOR_TRUSTED_PROXIES"] == "127.0.0.1/32"


def test_replicas_keep_what_the_environment_sets() -> None:
    env = {"FRONTDOOR_ISSUER_WORKERS": "3", "FRONTDOOR_LEDGER_WORKERS": "0", "FRONTDOOR_TRUSTED_PROXIES": "10.0.0.0/8"}
    replica_env_defaults(env)
    assert env == {"FRONTDOOR_ISSUER_WORKERS": "3", "FRONTDOOR_LEDGER_WORKERS": "0",
                   "FRONTDOOR_TRUSTED_PROXIES": "10.0.0.0/8"}

@pytest.mark.parametrize("raw", ["0", "9", "two", "-1"])
def test_a_bad_replica_count_is_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="FRONTDOOR_REPLICAS"):
        replica_count({"FRONTDOOR_REPLICAS": raw})


def test_replica_count_defaults_to_one() -> None:
    assert replica_count({}) == 1
    assert replica_count({"FRONTDOOR_REPLICAS": "2"}) == 2


def test_haproxy_accepts_the_configuration(tmp_path: Path) -> None:
    haproxy = shutil.which("haproxy")
    assert haproxy, "HAProxy is not installed (apt-get install haproxy; .ci/run installs it)"
    backends = [Backend("issuer", 18101, {"issuer-1": 18201, "issuer-2": 18202}),
                Backend("ledger", 18102, {"ledger-1": 18301, "ledger-2": 18302})]
    text = haproxy_config(backends, tmp_path / "haproxy.sock")
    config = tmp_path / "haproxy.cfg"
    config.write_text(text)
    check = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "bind 127.0.0.1:18101" in text and "server issuer-2 127.0.0.1:18202 check" in text
    assert text.count("balance roundrobin") == 2 and text.count("option httpchk GET /readyz") == 2
    assert "retry-on conn-failure empty-response" in text and "option redispatch" in text
    # A POST that may have reached a replica is not replayed by the load balancer.
    assert "disable-l7-retry unless METH_GET || METH_HEAD || METH_OPTIONS" in text
