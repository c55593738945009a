"""The slow-marked checks of this folder run only when asked for (``pytest -m slow``): the default run keeps their quick
versions. (The project declares the ``slow`` marker without deselecting it by default.)"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items) -> None:
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="a long statistical check: run it with -m slow")
    for item in items:
        if "slow" in item.keywords and HERE in Path(item.path).resolve().parents:
            item.add_marker(skip)
