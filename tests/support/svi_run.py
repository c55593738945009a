"""The tiny SVI fit of the checkpoint tests; ``python -m tests.support.svi_run DIR`` runs it with checkpoints in DIR.

Minibatches, so that a resumed run must restore the epoch's shuffle as well as the parameters,
Adam's moments and the RNG (a scheduler's state is checked in-process, in tests/inference/svi/test_checkpoint.py).
"""

from __future__ import annotations

import sys
import warnings

import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.models import BayesianMLP

STEPS = 150
CHECKPOINT_EVERY = 10


def run(**options) -> Posterior:
    """The fit, with ``checkpoint_dir`` / ``resume`` as given."""
    model = BayesianMLP(1, 1, hidden=(5,), likelihood={"name": "gaussian", "scale": None})
    with warnings.catch_warnings():  # a run this short is still climbing, and says so: these tests are about resuming
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(model, load_toy1d(n_train=40, n_test=10), "svi", steps=STEPS, batch_size=10, lr=0.02, num_samples=5, seed=11,
                   progress=False, **options)


if __name__ == "__main__":
    torch.set_num_threads(1)
    run(checkpoint_dir=sys.argv[1], checkpoint_every=CHECKPOINT_EVERY)
