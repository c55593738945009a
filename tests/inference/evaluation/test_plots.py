"""The plotting modules write PNGs without touching the user's matplotlib backend."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.subprocess
def test_importing_the_plots_keeps_the_users_backend():
    """A notebook's inline backend (here: svg, set the same way through MPLBACKEND) survives the import."""
    probe = ("import matplotlib; import bnn.inference.evaluation.plots, bnn.inference.evaluation.posterior_plots, "
             "bnn.experiments.comparison.report; print(matplotlib.get_backend())")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            env={**os.environ, "MPLBACKEND": "svg"})
    assert result.stdout.strip() == "svg"
