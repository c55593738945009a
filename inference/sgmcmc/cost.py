r"""What an SG-MCMC run costs: at least one minibatch gradient per chain and step, :math:`C (W + S \cdot \text{thin})`
for ``C`` chains of ``W`` burn-in steps and ``S`` kept draws, :math:`C M L` for ``M`` cycles of ``L`` steps, chains in
parallel processes as free cores allow."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.posterior_mode.log_joint import log_joint_gradient_seconds

from bnn.options import Options
from bnn.runtime import workers


def count(options: Options, rows: int, model) -> GradientCount:
    """The steps of every chain of ``options`` (SGLD's, SGHMC's or the cyclical samplers')."""
    plan = options.plan()
    return GradientCount(options.num_chains * plan.total, min(options.num_chains, workers.free_cores()), "floor",
                         f"{options.num_chains} chains x {plan.describe()} steps")


COST = CostModel(count, log_joint_gradient_seconds, "log joint", minibatch=True)
