"""Importing the package changes no state of the process it is imported into, lets no warning of its own, or of
arviz's first import, reach the user, and imports no library that compiles code when imported and is needed only to
score (every worker process imports the package)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from importlib.util import find_spec
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
PACKAGE_FOLDERS = [ROOT / folder for folder in PACKAGE_DIRS.values()]
MODULES = "bnn.inference, bnn.cli.main, bnn.inference.evaluation, bnn.guides, bnn.models, bnn.datasets"

# Run in a fresh interpreter: snapshot the process-wide state, import the package, snapshot again. Warnings are
# recorded through showwarning with an "always" filter in front, not inside catch_warnings, which would put back
# any filter the import adds and hide it.
SCRIPT = textwrap.dedent(
    f"""
    import json, logging, signal, sys, warnings
    # libraries that add warning filters of their own when first imported, whoever imports them
    import matplotlib, numpy, scipy.stats, sklearn.metrics, torch

    def state():
        return {{
            "warning filters": [repr(f) for f in warnings.filters],
            "torch default dtype": str(torch.get_default_dtype()),
            "torch threads": torch.get_num_threads(),
            "matplotlib backend": matplotlib.get_backend(auto_select=False),
            "root logger level": logging.getLogger().level,
            "root logger handlers": [repr(h) for h in logging.getLogger().handlers],
            "numpy errors": numpy.geterr(),
            "SIGINT handler": repr(signal.getsignal(signal.SIGINT)),
            "SIGTERM handler": repr(signal.getsignal(signal.SIGTERM)),
        }}

    warnings.simplefilter("always")
    caught = []
    warnings.showwarning = lambda message, category, filename, *args, **kwargs: caught.append(
        (category.__name__, str(message), filename))
    before = state()
    import {MODULES}
    after = state()
    json.dump({{"before": before, "after": after, "warnings": caught, "modules": sorted(sys.modules)}}, sys.stdout)
    """
)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    """The state before and after the import, and the warnings shown, in a fresh interpreter."""
    tmp_path = tmp_path_factory.mktemp("import")
    # arviz warns once a day, remembered under the user's cache: an empty cache makes this run the first of the day
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_importing_the_package_leaves_the_process_state_as_it_was(report):
    changed = {key: (value, report["after"][key]) for key, value in report["before"].items() if report["after"][key] != value}
    assert not changed


def test_importing_the_package_shows_no_warning_of_its_own_or_of_arviz(report):
    folders = [*PACKAGE_FOLDERS, Path(find_spec("arviz").origin).parent]
    ours = [w for w in report["warnings"] if any(Path(w[2]).is_relative_to(folder) for folder in folders)]
    assert not ours


TEST_ONLY = {"scoringrules", "hypothesis", "pytest"}
"""Libraries of the ``dev`` extra (pyproject.toml) that the package must not import: a user's install has none of them
(scoringrules, the CRPS's reference in the tests, also compiles numba kernels for seconds when imported)."""


def test_importing_the_package_imports_no_library_that_only_the_tests_install(report):
    assert TEST_ONLY.isdisjoint(report["modules"])
