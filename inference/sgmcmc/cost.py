r"""What an SG-MCMC run costs: with ``init="map"`` each chain's MAP fit first
(:mod:`bnn.inference.map_search.map_cost`, in the processes they run in as free cores allow) and, where the step
size comes from it, the curvature's power iteration (two gradients per iteration); then at least one minibatch
gradient per chain and step, :math:`C (W + S \cdot \text{thin})` for ``C`` chains of ``W`` burn-in steps and ``S`` kept
draws, :math:`C M L` for ``M`` cycles of ``L`` steps, the chains side by side. The MAP fit's Adam steps and the power
iteration's gradients are on all the data and are counted as minibatch gradients: a floor."""

from __future__ import annotations

import dataclasses

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.map_search.log_joint import log_joint_gradient_seconds
from bnn.inference.map_search.map_cost import map_fits_count, polish_iteration_seconds
from bnn.inference.sgmcmc.curvature import POWER_ITERATIONS
from bnn.inference.sgmcmc.options import ChainStart, SGMCMCOptions

from bnn.runtime import workers


def count(options: SGMCMCOptions, rows: int, model) -> GradientCount:
    """The MAP starts' work and the steps of every chain of ``options`` (SGLD's, SGHMC's or the cyclical samplers')."""
    plan, chains = options.plan(), options.num_chains
    side_by_side = min(chains, workers.free_cores())
    steps = chains * plan.total
    how = f"{chains} chains x {plan.describe()} steps"
    if options.init is not ChainStart.MAP:
        return GradientCount(steps, side_by_side, "floor", how)
    curvature = 2 * POWER_ITERATIONS * chains if options.fixed_step_size() is None else 0
    maps = map_fits_count(options, model, rows, members=chains, parallel=min(options.workers(), workers.free_cores()))
    # the estimate divides all the work by maps.parallel; the chains' share is divided by side_by_side
    chain_work = round((steps + curvature) * maps.parallel / side_by_side)
    curvature_how = f", {curvature} gradients of the curvature's power iteration" if curvature else ""
    return dataclasses.replace(maps, gradients=maps.gradients + chain_work, bound="floor",
                               how=f"{maps.how}{curvature_how}; then {how}")


COST = CostModel(count, log_joint_gradient_seconds, "log joint", minibatch=True, polish_seconds=polish_iteration_seconds,
                 draws=lambda options: options.num_chains * options.plan().num_samples,
                 batch_rows=lambda model, rows, options: options.batch_rows(model, rows))
