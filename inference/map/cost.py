"""What a MAP fit costs (:mod:`bnn.inference.posterior_mode.map_cost`)."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.map.options import MapOptions
from bnn.inference.posterior_mode.log_joint import log_joint_gradient_seconds
from bnn.inference.posterior_mode.map_cost import map_fits_count


def count(options: MapOptions, rows: int, model) -> GradientCount:
    """The worst-case gradients of the MAP fit of ``options``."""
    return map_fits_count(options, model)


COST = CostModel(count, log_joint_gradient_seconds, "log joint")
