"""What a deep ensemble costs: ``num_members`` MAP fits (:mod:`bnn.inference.posterior_mode.map_cost`), members in
parallel processes as free cores allow."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.posterior_mode.log_joint import log_joint_gradient_seconds
from bnn.inference.posterior_mode.map_cost import map_fits_count

from bnn.runtime import workers


def count(options: EnsembleOptions, rows: int, model) -> GradientCount:
    """The worst-case gradients of each process's share of the members' MAP fits."""
    return map_fits_count(options, model, members=options.num_members,
                          parallel=min(options.num_members, workers.free_cores()))


COST = CostModel(count, log_joint_gradient_seconds, "log joint")
