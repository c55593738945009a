"""What a Laplace fit costs: its MAP fit (:mod:`bnn.inference.map_search.map_cost`), with the evidence search's
refits where the prior precision is tuned by refitting them
(:func:`~bnn.inference.laplace.posthoc_precision.refits_affordable`); the curvature comes on top."""

from __future__ import annotations

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.laplace.posthoc_precision import refits_affordable
from bnn.inference.map_search.map_cost import map_cost_model, map_fits_count


def count(options: LaplaceOptions, rows: int, model) -> GradientCount:
    """The expected and worst-case work of the MAP fit of ``options``."""
    tuned = options.tune_prior_precision is not False and (model is None or refits_affordable(model, rows))
    return map_fits_count(options, model, rows, tuned=tuned)


COST = map_cost_model(count)
