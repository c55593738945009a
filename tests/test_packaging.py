"""What an install holds: one import name, ``bnn``, with its subpackages mapped from the top of the
repository; no tests or benchmarks; the ``bnn`` command and ``python -m bnn``; every imported library declared."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIRS = PROJECT["tool"]["setuptools"]["package-dir"]  # import name -> folder of the repository
NOT_SOURCES = [".git", ".venv", "build", "results", "notebooks", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"]
OLD_IMPORT_NAMES = ["models", "inference", "guides", "bnn_data", "datasets"]


def run_outside_checkout(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run in ``cwd`` with no PYTHONPATH: the modules found are the installed ones, not the checkout's folders."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Iterator[zipfile.ZipFile]:
    """The wheel built from a copy of the checkout (setuptools writes build/ and egg-info beside the sources)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(tmp), str(source)]
    result = subprocess.run(build, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (path,) = tmp.glob("bnn_collection-*.whl")
    with zipfile.ZipFile(path) as archive:
        yield archive


def test_the_wheel_holds_one_top_level_package_bnn(wheel):
    outside = [name for name in wheel.namelist() if not name.startswith("bnn/") and not name.split("/")[0].endswith(".dist-info")]
    assert not outside
    (dist_info,) = {name.split("/")[0] for name in wheel.namelist() if not name.startswith("bnn/")}
    assert dist_info.startswith("bnn_collection-")


def test_the_wheel_holds_every_subpackage_and_no_tests_or_benchmarks(wheel):
    names = set(wheel.namelist())
    for package in PROJECT["tool"]["setuptools"]["packages"]:
        assert package.replace(".", "/") + "/__init__.py" in names, package
    assert {"bnn/inference/svi/fit.py", "bnn/inference/nuts/engines/nutpie.py", "bnn/datasets/uci.py"} <= names
    assert not [name for name in names if {"tests", "benchmarks"} & set(name.split("/")[:-1])]


def test_the_wheel_declares_the_console_script(wheel):
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    assert "bnn = bnn.console:main" in wheel.read(entry_points).decode()


@pytest.mark.parametrize("name", OLD_IMPORT_NAMES)
def test_the_folders_are_not_import_names_of_their_own(name, tmp_path):
    result = run_outside_checkout([sys.executable, "-c", f"import {name}"], tmp_path)
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr, result.stderr


def test_the_subpackages_import_under_bnn_from_anywhere(tmp_path):
    result = run_outside_checkout([sys.executable, "-c", "import bnn.models, bnn.inference, bnn.guides, bnn.datasets"], tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", ["script", "module"])
def test_the_command_line_lists_fit_and_compare(command, tmp_path):
    script = shutil.which("bnn", path=sysconfig.get_path("scripts"))
    assert script, "the console script bnn is not installed"
    args = [script, "--help"] if command == "script" else [sys.executable, "-m", "bnn", "--help"]
    result = run_outside_checkout(args, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "fit" in result.stdout and "compare" in result.stdout


def imported_top_level_modules(folder: Path) -> set[str]:
    """The top-level names of the absolute imports of every module under ``folder``."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_imported_library_is_a_declared_dependency():
    imported = set().union(*(imported_top_level_modules(ROOT / folder) for folder in PACKAGE_DIRS.values()))
    third_party = sorted(imported - set(sys.stdlib_module_names) - {"bnn", "__future__"})
    distributions = packages_distributions()
    assert not [name for name in third_party if name not in distributions], "imported but not installed"
    runtime_extra = PROJECT["project"]["optional-dependencies"]["ray"]  # imported only where asked for (--executor ray)
    declared = {canonicalize_name(Requirement(r).name) for r in PROJECT["project"]["dependencies"] + runtime_extra}
    undeclared = [name for name in third_party if not declared & {canonicalize_name(d) for d in distributions[name]}]
    assert not undeclared, {name: distributions[name] for name in undeclared}
