"""The polish counts of the MAP-centred fits' cost: a smooth network's refits grow as the square root of the rows."""

from __future__ import annotations

from bnn.inference.map_search.map_cost import KINKED_POLISH, SMOOTH_POLISH, PolishCounts, map_fits_count
from bnn.inference.map_search.polish import KINKED_LBFGS_MAX_ITER, LBFGS_MAX_ITER, LEVENBERG_MARQUARDT_MAX_ITER
from bnn.inference.point_estimate.options import MapOptions
from bnn.models import BayesianMLP


def test_a_smooth_networks_refits_grow_as_the_square_root_of_the_rows_and_its_final_polish_does_not():
    measured = SMOOTH_POLISH.rows
    assert SMOOTH_POLISH.at(measured) == SMOOTH_POLISH
    assert SMOOTH_POLISH.at(4 * measured) == PolishCounts(2 * SMOOTH_POLISH.first, 2 * SMOOTH_POLISH.refit,
                                                          SMOOTH_POLISH.final, 4 * measured)
    assert SMOOTH_POLISH.at(1).refit == 1  # a refit takes one iteration at least (7 x sqrt(1 / 100) rounds to 1)


def test_counts_measured_on_too_few_sizes_to_scale_are_kept_on_any_rows():
    assert KINKED_POLISH.rows is None and KINKED_POLISH.at(10_000) == KINKED_POLISH


def test_the_worst_case_takes_the_budget_of_the_polish_the_network_gets():
    """Without map_max_iter each polish may take its own default: Levenberg-Marquardt's below the dense limit, L-BFGS's
    above it (larger for a smooth network than for one with kinks); a budget the fit sets is taken either way."""
    small, large, kinked = (BayesianMLP(40, 10, hidden=(width,), activation=activation, likelihood="categorical")
                            for width, activation in ((5, "tanh"), (50, "tanh"), (50, "relu")))
    counts = {(model, budget): map_fits_count(MapOptions(map_max_iter=budget), model, rows=4000).polish_at_most
              for model in (small, large, kinked) for budget in (None, 7)}
    assert counts == {(small, None): LEVENBERG_MARQUARDT_MAX_ITER, (large, None): LBFGS_MAX_ITER,
                      (kinked, None): KINKED_LBFGS_MAX_ITER, (small, 7): 7, (large, 7): 7, (kinked, 7): 7}
