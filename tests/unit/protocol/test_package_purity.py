"""frontdoor_protocol stays pure: no I/O, no framework, no other Frontdoor package, no peer SDK."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import frontdoor_protocol

_ALLOWED = {
    "__future__", "abc", "base64", "collections", "dataclasses", "datetime", "enum", "functools", "hashlib",
    "hmac", "itertools", "json", "math", "re", "secrets", "string", "types", "typing", "urllib.parse",
    "cryptography", "joserfc", "msgspec", "frontdoor_protocol",
}  # fmt: skip


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _allowed(name: str) -> bool:
    return any(name == allowed or name.startswith(allowed + ".") for allowed in _ALLOWED) and not (
        name.startswith("urllib") and name != "urllib.parse"
    )


def test_only_pure_dependencies_are_imported() -> None:
    """Only msgspec, joserfc, cryptography and I/O-free stdlib modules; never personal_agent_protocol."""
    source = Path(frontdoor_protocol.__file__).parent
    modules = sorted(source.rglob("*.py"))
    assert len(modules) >= 10
    offending = {f"{path.name}: {name}" for path in modules for name in _imports(path) if not _allowed(name)}
    assert not offending


def test_purity_check_can_fail() -> None:
    """The rule itself refuses what it must refuse."""
    for forbidden in ("personal_agent_protocol", "frontdoor_core", "httpx", "urllib.request", "socket", "os"):
        assert not _allowed(forbidden)


def test_every_public_name_is_exported() -> None:
    """Callers import from the package: every name in __all__ exists and nothing is listed twice."""
    names = frontdoor_protocol.__all__
    assert len(names) == len(set(names))
    assert all(hasattr(frontdoor_protocol, name) for name in names)
    assert importlib.util.find_spec("frontdoor_protocol.py") is None
