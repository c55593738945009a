"""What a MAP fit costs (:mod:`bnn.inference.map_search.map_cost`)."""

from __future__ import annotations

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.map_search.map_cost import map_cost_model, map_fits_count
from bnn.inference.point_estimate.options import MapOptions


def count(options: MapOptions, rows: int, model) -> GradientCount:
    """The expected and worst-case work of the MAP fit of ``options``."""
    return map_fits_count(options, model, rows)


COST = map_cost_model(count, lambda options: 1)
