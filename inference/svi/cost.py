r"""What an SVI fit costs: :math:`T` steps, each timed as a whole by a short run of the fit itself on one minibatch:
its guide, particles, minibatch and JIT setting: after :data:`WARM_STEPS` untimed steps (the guide's set-up, the JIT's
compilation and the first runs it optimises take seconds, then a step takes milliseconds), the median over
:data:`TIMED_RUNS` runs of :data:`TIMED_STEPS` steps of their mean (one run of a few dozen milliseconds is at the mercy
of whatever else the machine does then)."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace

import pyro
import torch
from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.inference.svi.guide import build_svi_guide
from bnn.inference.svi.loop import SVILoop
from bnn.inference.svi.minibatches import StepPlan, batch_rows
from bnn.inference.svi.options import SVIOptions

from bnn.runtime.jit_deprecation import torch_jit_deprecation_ignored
from bnn.runtime.seeding import seeded

WARM_STEPS = 10
"""Steps run before the timed ones: the first sets the guide up and compiles a JIT loss, the next two run the JIT's
profiling and optimisation."""
TIMED_STEPS = 20
TIMED_RUNS = 5


def count(options: SVIOptions, rows: int, model) -> GradientCount:
    """The steps of a fit of ``options`` on ``rows`` examples."""
    steps = StepPlan.of(model, rows, options).total_steps
    return GradientCount(steps, 1, "measured steps", f"{steps} steps")


def step_seconds(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> float:
    """Wall time of a step of ``options`` as the fit takes it (JIT or not; no checkpoints or progress bar): the median
    of :data:`TIMED_RUNS` means of :data:`TIMED_STEPS` steps after :data:`WARM_STEPS`, in the fit's own seed and an
    isolated parameter store."""
    total = WARM_STEPS + TIMED_RUNS * TIMED_STEPS
    jit = StepPlan.of(model, x.shape[0], options).jit  # the fit's own choice, not the short run's
    short = replace(options, steps=total, epochs=None, num_samples=1, progress=False, jit=jit,
                    checkpoint_dir=None, checkpoint_every=None, resume=None)
    plan, model = StepPlan.of(model, x.shape[0], short), snapshot_model(model)
    with seeded(short.seed), pyro.get_param_store().scope(), torch_jit_deprecation_ignored():  # as SVILoop.run
        guide, name = build_svi_guide(model, x, y, short)
        loop = SVILoop(model, x, y, guide, name, short, plan, None)
        for step in range(WARM_STEPS):
            loop.step(step)
        means = []
        for first in range(WARM_STEPS, total, TIMED_STEPS):
            start = time.perf_counter()
            for step in range(first, first + TIMED_STEPS):
                loop.step(step)
            means.append((time.perf_counter() - start) / TIMED_STEPS)
        return statistics.median(means)


COST = CostModel(count, step_seconds, "svi step", minibatch=True, unit="steps", batch_rows=batch_rows)
