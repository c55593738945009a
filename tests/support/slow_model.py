"""A network that turns slow on a signal from the test, for the NUTS stop tests' subprocess (importable, so it
reaches the worker processes)."""

from __future__ import annotations

import time
from pathlib import Path

from bnn.models import BayesianMLP

SLOW_SECONDS = 10.0


class SlowOnceMarked(BayesianMLP):
    """A model whose every run of the program, so every gradient of Pyro's potential, takes ``SLOW_SECONDS`` once
    the file ``marker`` exists (importable, so it reaches worker processes): then one iteration takes longer than
    :data:`~bnn.inference.nuts.chains.STOP_GRACE_SECONDS`."""

    marker: Path

    def __call__(self, *args, **kwargs):
        if self.marker.exists():
            time.sleep(SLOW_SECONDS)
        return super().__call__(*args, **kwargs)
