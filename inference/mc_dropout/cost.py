"""What an MC dropout fit costs: at least its training steps' gradients on a minibatch (a floor: the network's masks and the
optimiser come on top)."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.map_search.log_joint import log_joint_gradient_seconds
from bnn.inference.mc_dropout.options import MCDropoutOptions


def count(options: MCDropoutOptions, rows: int, model) -> GradientCount:
    """The training steps of ``options`` on ``rows`` rows."""
    steps = options.training_steps(rows)
    return GradientCount(steps, 1, "floor", f"{steps} steps")


COST = CostModel(count, log_joint_gradient_seconds, "log joint", minibatch=True)
