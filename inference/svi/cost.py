r"""What an SVI fit costs: :math:`T` steps, each timed as a whole by a short run of the fit itself on one minibatch
(:data:`TIMED_STEPS` steps of its guide, particles and minibatch, without JIT: a JIT run is faster)."""

from __future__ import annotations

from dataclasses import replace

import torch
from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.svi.fit import run_svi
from bnn.inference.svi.minibatches import StepPlan
from bnn.inference.svi.options import SVIOptions

TIMED_STEPS = 11


def count(options: SVIOptions, rows: int, model) -> GradientCount:
    """The steps of a fit of ``options`` on ``rows`` examples."""
    steps = StepPlan.of(rows, options).total_steps
    return GradientCount(steps, 1, "measured steps", f"{steps} steps")


def step_seconds(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> float:
    """Mean wall time of a step of ``options`` (without JIT, checkpoints or a progress bar), from a fit of
    :data:`TIMED_STEPS` steps, its first step (which sets up the guide) left out."""
    short = replace(options, steps=TIMED_STEPS, epochs=None, num_samples=1, jit=False, progress=False,
                    checkpoint_dir=None, checkpoint_every=None, resume=None)
    record = run_svi(snapshot_model(model), x, y, short).record
    return (record.train_seconds - record.first_step_seconds) / (TIMED_STEPS - 1)


COST = CostModel(count, step_seconds, "svi step", minibatch=True, unit="steps")
