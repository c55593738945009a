r"""What SWAG costs: each member's MAP fit (:mod:`bnn.inference.map_search.map_cost`), then its SGD steps,
:math:`E \lceil N / B \rceil` for ``E`` epochs of batches of ``B``, counted as Adam steps on the full data (an upper bound
for a minibatch gradient); the members' MAP fits in the processes they run in as free cores allow (as the deep
ensemble's), their SGD side by side."""

from __future__ import annotations

import dataclasses
import math

from bnn.inference.core.cost_model import GradientCount
from bnn.inference.map_search.map_cost import map_cost_model, map_fits_count
from bnn.inference.swag.options import SWAGOptions

from bnn.runtime import workers


def count(options: SWAGOptions, rows: int, model) -> GradientCount:
    """The expected work of the MAP fits and the SGD steps of every member."""
    maps = map_fits_count(options, model, rows, members=options.num_members,
                          parallel=min(options.workers(), workers.free_cores()))
    steps = options.num_members * options.swag_epochs * math.ceil(rows / min(options.batch_rows(rows), rows))
    # the estimate divides the work by the processes, which the SGD after the MAP fits, in this process, has not
    return dataclasses.replace(maps, gradients=maps.gradients + steps * maps.parallel,
                               how=f"{maps.how}; then {options.num_members} x {options.swag_epochs} epochs of SGD, "
                                   f"{steps} steps in all")


COST = map_cost_model(count, lambda options: options.num_members * options.num_samples)
