"""What a deep ensemble costs: ``num_members`` MAP fits (:mod:`bnn.inference.map_search.map_cost`), members in
parallel processes as free cores allow: whole rounds of members, the last one perhaps with idle processes."""

from __future__ import annotations

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.map_search.map_cost import map_cost_model, map_fits_count

from bnn.runtime import workers


def count(options: EnsembleOptions, rows: int, model) -> GradientCount:
    """The expected and worst-case work of the members' MAP fits, in the processes they run in
    (:meth:`~bnn.inference.ensemble.options.EnsembleOptions.workers`) as free cores allow."""
    return map_fits_count(options, model, rows, members=options.num_members,
                          parallel=min(options.workers(), workers.free_cores()))


COST = map_cost_model(count, lambda options: options.num_members)
