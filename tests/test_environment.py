"""The pins of environment.yml and pyproject.toml agree, so both install paths give the same stack."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


OPTIONAL_EXTRAS = {"bench"}  # not in environment.yml, not installed by `make test`


def pyproject_pins() -> dict[str, str]:
    """The pins of the dependencies and of the extras the tested install path installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for name, extra in project["optional-dependencies"].items() if name not in OPTIONAL_EXTRAS for r in extra]
    return dict(r.split("==") for r in project["dependencies"] + extras)


def environment_pins() -> dict[str, str]:
    lines = (ROOT / "environment.yml").read_text().splitlines()
    pins = [m.groups() for m in (re.match(r"\s*-\s*([A-Za-z0-9_.\-]+)==(\S+)\s*$", line) for line in lines) if m]
    return dict(pins)


def test_every_requirement_is_pinned_exactly():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    assert all("==" in r for r in requirements), [r for r in requirements if "==" not in r]


def test_environment_yml_matches_pyproject():
    assert environment_pins() == pyproject_pins()


def test_environment_yml_uses_python_311():
    assert re.search(r"^\s*-\s*python=3\.11\s*$", (ROOT / "environment.yml").read_text(), re.M)


def test_installed_versions_are_the_pinned_ones():
    from importlib.metadata import version

    for package, pinned in pyproject_pins().items():
        assert version(package).split("+")[0] == pinned, package
