"""What a Laplace fit costs: its MAP fit (:mod:`bnn.inference.posterior_mode.map_cost`), with the evidence search
unless ``tune_prior_precision=False``; the curvature comes on top."""

from __future__ import annotations

from bnn.inference.core.cost_model import CostModel, GradientCount
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.posterior_mode.log_joint import log_joint_gradient_seconds
from bnn.inference.posterior_mode.map_cost import map_fits_count


def count(options: LaplaceOptions, rows: int, model) -> GradientCount:
    """The worst-case gradients of the MAP fit of ``options``."""
    return map_fits_count(options, model, tuned=options.tune_prior_precision is not False)


COST = CostModel(count, log_joint_gradient_seconds, "log joint")
