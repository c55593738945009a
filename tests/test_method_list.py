"""One list of methods: every list, table and docstring that enumerates the methods is derived from
:data:`bnn.inference.METHODS` or checked against it here, so that adding a method that misses one fails the suite."""

from __future__ import annotations

import re
from pathlib import Path

from bnn.inference import METHODS

from tests.support.quick_options import QUICK

ROOT = Path(__file__).resolve().parents[1]


def method_package(name: str) -> str:
    """The subpackage of ``bnn.inference`` that defines method ``name`` (``svi``, ``point_estimate``, ...)."""
    return METHODS.get(name).run.__module__.split(".")[2]


def test_every_method_has_quick_test_options():
    assert set(QUICK) == set(METHODS.names())


def test_the_readmes_methods_table_has_one_row_for_every_method():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| `method=` | what it is"):].split("\n\n", 1)[0]
    named = re.findall(r"`([a-z-]+)`", "\n".join(row.split("|")[1] for row in table.splitlines()[2:]))
    assert sorted(named) == METHODS.names()


def test_the_methods_reference_documents_every_method():
    reference = (ROOT / "docs" / "methods.rst").read_text()
    assert [name for name in METHODS.names() if f"``{name}``" not in reference] == []


def test_the_architecture_names_every_method_package_among_the_layers():
    layers = (ROOT / "docs" / "architecture.rst").read_text().split("Layers\n------", 1)[1].split("A method's folder")[0]
    packages = sorted({method_package(name) for name in METHODS.names()})
    assert [package for package in packages if not re.search(rf"(\.|bnn\.inference\.){package}\b", layers)] == []
    contract = (ROOT / "pyproject.toml").read_text()
    assert [package for package in packages if f"bnn.inference.{package}" not in contract] == []


def test_each_record_takes_its_method_name_from_its_method():
    assert {name: METHODS.get(name).record.method for name in METHODS.names()} == {name: name for name in METHODS.names()}
