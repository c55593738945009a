r"""What an SVI fit costs: :math:`T` steps, each timed as a whole by a short run of the fit itself on one minibatch:
its guide, particles, minibatch and JIT setting, :data:`TIMED_STEPS` steps timed after :data:`WARM_STEPS` that are not
(the guide's set-up, the JIT's compilation and the first runs it optimises take seconds, then a step takes
milliseconds)."""

from __future__ import annotations

import time
from dataclasses import replace

import pyro
import torch
from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.svi.guide import build_svi_guide
from bnn.inference.svi.loop import SVILoop
from bnn.inference.svi.minibatches import StepPlan
from bnn.inference.svi.options import SVIOptions

from bnn.runtime.seeding import seeded

WARM_STEPS = 10
"""Steps run before the timed ones: the first sets the guide up and compiles a JIT loss, the next two run the JIT's
profiling and optimisation."""
TIMED_STEPS = 20


def count(options: SVIOptions, rows: int, model) -> GradientCount:
    """The steps of a fit of ``options`` on ``rows`` examples."""
    steps = StepPlan.of(rows, options).total_steps
    return GradientCount(steps, 1, "measured steps", f"{steps} steps")


def step_seconds(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> float:
    """Mean wall time of a step of ``options`` as the fit takes it (JIT or not; no checkpoints or progress bar): the
    :data:`TIMED_STEPS` steps after :data:`WARM_STEPS`, in the fit's own seed and an isolated parameter store."""
    short = replace(options, steps=WARM_STEPS + TIMED_STEPS, epochs=None, num_samples=1, progress=False,
                    checkpoint_dir=None, checkpoint_every=None, resume=None)
    plan, model = StepPlan.of(x.shape[0], short), snapshot_model(model)
    with seeded(short.seed), pyro.get_param_store().scope():
        guide, name = build_svi_guide(model, x, y, short)
        loop = SVILoop(model, x, y, guide, name, short, plan, None)
        for step in range(WARM_STEPS):
            loop.step(step)
        start = time.perf_counter()
        for step in range(WARM_STEPS, WARM_STEPS + TIMED_STEPS):
            loop.step(step)
        return (time.perf_counter() - start) / TIMED_STEPS


COST = CostModel(count, step_seconds, "svi step", minibatch=True, unit="steps")
