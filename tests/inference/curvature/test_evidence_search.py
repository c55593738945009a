"""The one-dimensional search of bnn.inference.curvature.evidence_search, against functions whose maximum is known."""

from __future__ import annotations

import math

import pytest
from bnn.inference.curvature.evidence_search import MAX_EVALUATIONS, MAX_STEPS, STEP, TOLERANCE, maximize_on_log_scale


class Counted:
    """``function`` that records where it was called."""

    def __init__(self, function) -> None:
        self.function, self.points = function, []

    def __call__(self, point: float) -> float:
        self.points.append(point)
        return self.function(point)


@pytest.mark.parametrize("peak", [-7.3, -0.2, 0.0, 0.9, 11.1])
def test_a_quadratic_is_maximised_exactly_from_either_side(peak):
    """The final parabola is exact for a quadratic, whichever way the bracketing steps went."""
    function = Counted(lambda u: 3.0 - 0.7 * (u - peak) ** 2)
    result = maximize_on_log_scale(function, 0.0)
    assert result.bracketed and result.point == pytest.approx(peak, abs=1e-9) and result.value == pytest.approx(3.0)
    assert result.evaluations == len(set(function.points)) <= MAX_EVALUATIONS  # every point once


def test_a_smooth_unimodal_function_is_maximised_within_the_tolerance():
    result = maximize_on_log_scale(lambda u: u - 2.2 - math.exp(u - 2.2), -4.0)  # v - e^v: one maximum, at v = 0
    assert result.bracketed and abs(result.point - 2.2) <= TOLERANCE


def test_a_function_rising_to_the_end_is_reported_unbracketed_at_the_last_step():
    result = maximize_on_log_scale(lambda u: u, 1.5)
    assert not result.bracketed and result.point == pytest.approx(1.5 + MAX_STEPS * STEP)
    assert result.evaluations == 2 + MAX_STEPS


def test_nan_counts_as_minus_infinity():
    """A MAP refit whose precision is not positive definite gives NaN or -inf; the search steps back from it."""
    result = maximize_on_log_scale(lambda u: math.nan if u < -1.0 else -(u - 0.5) ** 2, 3.0)
    assert result.bracketed and result.point == pytest.approx(0.5, abs=1e-9)
