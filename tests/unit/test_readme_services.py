"""The README names the services that exist, all of them, and no other (#14 part 5).

Two places in README.md list services: the repository layout table (one ``services/<name>/``
row per service package) and step 4 of ``make run`` (the processes it starts, with their
ports). They are compared with the same list the compose and chart topology test uses
(``existing_processes`` in test_helm_chart.py: the ASGI apps and the processes ``make run``
spawns), so a service added, renamed or removed without the README fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from test_helm_chart import HTTP_PORTS, existing_processes

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

NORTHWIND_PORT = 8003
"""The example company, started by ``make run`` beside the services (not a Frontdoor service)."""
PROCESS_WORDS = {
    "console": r"\bconsole\b",
    "issuer": r"\bissuer\b",
    "ledger": r"\bledger\b",
    "deliverer": r"\bdeliverer\b",
    "worker": r"\bCelery worker\b",
    "beat": r"\bbeat\b",
}
"""How step 4 of ``make run`` names each process."""


def service_packages() -> set[str]:
    """The service packages in the tree: ``services/<name>/`` with a pyproject."""
    return {path.parent.name for path in ROOT.glob("services/*/pyproject.toml")}


def layout_services(readme: str) -> set[str]:
    """The ``services/<name>/`` rows of the README's repository layout table."""
    return set(re.findall(r"^\| `services/([a-z_]+)/` \|", readme, re.MULTILINE))


def started_services_item(readme: str) -> str:
    """Step 4 of ``make run``: the numbered item that starts with ``**The services**``."""
    match = re.search(r"^4\. \*\*The services\*\*(.*?)(?=^\S|\n\n)", readme, re.MULTILINE | re.DOTALL)
    assert match, "README.md has no '4. **The services**' step under `make run`"
    return match.group(1)


def readme_problems(readme: str, packages: set[str], processes: set[str], http_ports: dict[str, int]) -> list[str]:
    """Every disagreement between the README and the services that exist."""
    problems: list[str] = []
    listed = layout_services(readme)
    problems += [f"layout table names services/{name}/, which does not exist" for name in sorted(listed - packages)]
    problems += [f"layout table omits services/{name}/" for name in sorted(packages - listed)]
    item = started_services_item(readme)
    for process in sorted(processes):
        pattern = PROCESS_WORDS.get(process)
        if pattern is None:
            problems.append(f"make run starts {process}, which the README does not describe")
        elif not re.search(pattern, item):
            problems.append(f"step 4 of make run omits the {process}")
    for word in sorted(set(PROCESS_WORDS) - processes):
        if re.search(PROCESS_WORDS[word], item):
            problems.append(f"step 4 of make run names the {word}, which make run does not start")
    ports = {int(port) for port in re.findall(r"127\.0\.0\.1:(\d+)", item)}
    known = {*http_ports.values(), NORTHWIND_PORT}
    problems += [f"step 4 of make run names port {port}, which no service listens on" for port in sorted(ports - known)]
    problems += [f"step 4 of make run omits {name} on port {port}" for name, port in sorted(http_ports.items())
                 if port not in ports]
    return problems


def test_the_readme_names_exactly_the_services_that_exist() -> None:
    assert readme_problems(README.read_text(), service_packages(), existing_processes(), HTTP_PORTS) == []


def test_the_check_catches_an_extra_and_a_missing_service() -> None:
    readme = README.read_text()
    assert "| `services/ledger/` |" in readme, "the layout table changed shape: update this test"
    extra = readme.replace("| `services/ledger/` |", "| `services/billing/` | billing |\n| `services/ledger/` |", 1)
    assert readme_problems(extra, service_packages(), existing_processes(), HTTP_PORTS) == [
        "layout table names services/billing/, which does not exist"]
    missing = re.sub(r"^\| `services/ledger/` \|.*\n", "", readme, count=1, flags=re.MULTILINE)
    assert readme_problems(missing, service_packages(), existing_processes(), HTTP_PORTS) == [
        "layout table omits services/ledger/"]


def test_the_check_catches_a_process_the_readme_does_not_describe() -> None:
    readme = README.read_text()
    processes = existing_processes()
    assert readme_problems(readme, service_packages(), {*processes, "scheduler"}, HTTP_PORTS) == [
        "make run starts scheduler, which the README does not describe"]
    without_deliverer = readme.replace("webhook deliverer", "webhook sender", 1)
    assert "step 4 of make run omits the deliverer" in readme_problems(
        without_deliverer, service_packages(), processes, HTTP_PORTS)
    assert "step 4 of make run names the deliverer, which make run does not start" in readme_problems(
        readme, service_packages(), processes - {"deliverer"}, HTTP_PORTS)
    moved = readme.replace("127.0.0.1:8002", "127.0.0.1:8009", 1)
    assert readme_problems(moved, service_packages(), processes, HTTP_PORTS) == [
        "step 4 of make run names port 8009, which no service listens on",
        "step 4 of make run omits ledger on port 8002",
    ]
