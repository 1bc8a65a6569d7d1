"""License, versions and changelogs are declared consistently (#14 part 5).

Every package declares the repository's license (Apache-2.0, LICENSE at the root); the two
packages companies install, the sdk and the protocol library, ship the license text and a
Keep a Changelog file whose newest version is the one their pyproject builds.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LICENSE = "Apache-2.0"
SHIPPED = ("libs/sdk", "libs/protocol")


def tracked_pyprojects() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*/pyproject.toml"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    assert listed, "git ls-files found no package"
    return [ROOT / name for name in listed]


def newest_changelog_version(text: str) -> str | None:
    match = re.search(r"^## \[(\d+\.\d+\.\d+)\]", text, re.MULTILINE)
    return match.group(1) if match else None


def test_the_root_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


@pytest.mark.parametrize("pyproject", tracked_pyprojects(), ids=lambda path: str(path.parent.relative_to(ROOT)))
def test_every_package_declares_the_license(pyproject: Path) -> None:
    assert tomllib.loads(pyproject.read_text())["project"].get("license") == LICENSE


@pytest.mark.parametrize("package", SHIPPED)
def test_shipped_packages_carry_license_and_changelog(package: str) -> None:
    folder = ROOT / package
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    config = tomllib.loads((folder / "pyproject.toml").read_text())
    changelog = (folder / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in changelog
    assert newest_changelog_version(changelog) == config["project"]["version"]
    assert config["tool"]["hatch"]["build"]["targets"]["wheel"]["extra-metadata"] == {"CHANGELOG.md": "CHANGELOG.md"}


def test_newest_changelog_version_reads_the_first_release_heading() -> None:
    assert newest_changelog_version("# x\n\n## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n## [0.1.0]\n") == "0.2.0"
    assert newest_changelog_version("# x\n\n## 0.1.0\n") is None
