"""What a Laplace fit costs: its MAP fit (:mod:`bnn.inference.map_search.map_cost`), with the evidence search
unless ``tune_prior_precision=False``; the curvature comes on top."""

from __future__ import annotations

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.map_search.map_cost import map_cost_model, map_fits_count


def count(options: LaplaceOptions, rows: int, model) -> GradientCount:
    """The expected and worst-case work of the MAP fit of ``options``."""
    return map_fits_count(options, model, rows, tuned=options.tune_prior_precision is not False)


COST = map_cost_model(count)
