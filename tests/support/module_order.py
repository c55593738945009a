"""The test modules in the order that ends a parallel run soonest: the longest first.

``make test`` hands whole modules to its workers as they free up (``--dist loadfile``, which keeps each module's
fixtures in one process). Taken longest first, that is the longest-processing-time rule: the run ends on short
modules, not on a worker still in a long one while the other waits. Each module's seconds are read from
:data:`SECONDS_FILE`, written by a run with ``--module-seconds-out`` (the sum of its tests' set-up, call and tear-down
times); a module it does not list counts as :data:`UNLISTED_SECONDS`. The order only moves modules: each keeps its
tests in their order, and a stale file slows a run without changing what it checks. To refresh the file::

    .venv/bin/python -m pytest -n 2 --dist loadfile -m "not slow and not serial" --module-seconds-out tests/module_seconds.json
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

SECONDS_FILE = Path(__file__).resolve().parents[1] / "module_seconds.json"
"""Seconds per test module (its path from the repository root), from the last run that measured them."""

UNLISTED_SECONDS = 1.0
"""The seconds taken for a module the file does not list (a new one): below the long ones, above the quick ones."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--module-seconds-out", default=None, metavar="PATH",
                     help="write each test module's seconds in this run to PATH (JSON), for tests/support/module_order.py")


def module_of(nodeid: str) -> str:
    """The module part of a test's node id."""
    return nodeid.split("::", 1)[0]


def read_seconds(path: Path) -> dict[str, float]:
    """The module seconds in the JSON file ``path`` (none where there is no file)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def longest_first(items: list[pytest.Item], seconds: dict[str, float]) -> list[pytest.Item]:
    """``items`` with their modules in decreasing ``seconds`` (ties, and each module's tests, in collection order)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)
    ordered = sorted(modules, key=lambda module: -seconds.get(module, UNLISTED_SECONDS))  # sorted() is stable
    return [item for module in ordered for item in modules[module]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = longest_first(items, read_seconds(SECONDS_FILE))


class ModuleSeconds:
    """Adds up each module's test times as the reports come in (from every worker, under xdist) and writes them at the
    end of the session into the file, over its entries for the same modules (a run of some modules keeps the others')."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        merged = {**read_seconds(self.path), **{module: round(value, 1) for module, value in self.seconds.items()}}
        ranked = sorted(merged.items(), key=lambda pair: -pair[1])
        self.path.write_text(json.dumps(dict(ranked), indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--module-seconds-out")
    if path is not None and not hasattr(config, "workerinput"):  # the controller (or a run without xdist) writes it
        config.pluginmanager.register(ModuleSeconds(Path(path)), "module-seconds")
