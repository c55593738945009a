"""The polish counts of the MAP-centred fits' cost: a smooth network's refits grow as the square root of the rows."""

from __future__ import annotations

from bnn.inference.posterior_mode.map_cost import KINKED_POLISH, SMOOTH_POLISH, PolishCounts


def test_a_smooth_networks_refits_grow_as_the_square_root_of_the_rows_and_its_final_polish_does_not():
    measured = SMOOTH_POLISH.rows
    assert SMOOTH_POLISH.at(measured) == SMOOTH_POLISH
    assert SMOOTH_POLISH.at(4 * measured) == PolishCounts(2 * SMOOTH_POLISH.first, 2 * SMOOTH_POLISH.refit,
                                                          SMOOTH_POLISH.final, 4 * measured)
    assert SMOOTH_POLISH.at(1).refit == 1  # a refit takes one iteration at least (7 x sqrt(1 / 100) rounds to 1)


def test_counts_measured_on_too_few_sizes_to_scale_are_kept_on_any_rows():
    assert KINKED_POLISH.rows is None and KINKED_POLISH.at(10_000) == KINKED_POLISH
