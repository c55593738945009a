"""What an IVON fit costs: its steps, each ``mc_samples`` gradients of the log joint on a minibatch (the optimiser's
elementwise update on top)."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.ivon.options import IVONOptions
from bnn.inference.map_search.log_joint import log_joint_gradient_seconds


def count(options: IVONOptions, rows: int, model) -> GradientCount:
    """The gradients of ``options``'s training on ``rows`` rows."""
    epochs, steps = options.training_epochs(rows), options.training_steps(rows)
    return GradientCount(steps * options.mc_samples, 1, "expected",
                         f"{epochs} epochs x {steps // epochs} steps x {options.mc_samples} draws")


COST = CostModel(count, log_joint_gradient_seconds, "log joint", minibatch=True)
