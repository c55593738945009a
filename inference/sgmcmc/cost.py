r"""What an SG-MCMC run costs: at least :math:`C (W + S \cdot \text{thin})` gradients on a minibatch, for ``C`` chains
of ``W`` burn-in steps and ``S`` kept draws, chains in parallel processes as free cores allow."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.posterior_mode.log_joint import log_joint_gradient_seconds

from bnn.options import Options
from bnn.runtime import workers


def count(options: Options, rows: int, model) -> GradientCount:
    """The steps of every chain of ``options`` (SGLD's or SGHMC's)."""
    per_chain = options.num_warmup + options.num_samples * options.thin
    return GradientCount(options.num_chains * per_chain, min(options.num_chains, workers.free_cores()), "floor",
                         f"{options.num_chains} chains x ({options.num_warmup} + {options.num_samples} x "
                         f"{options.thin}) steps")


COST = CostModel(count, log_joint_gradient_seconds, "log joint", minibatch=True)
