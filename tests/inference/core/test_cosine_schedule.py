"""The cosine decay of a learning rate: from the peak, through half of it midway, down to near zero, never rising."""

from __future__ import annotations

import math

from bnn.inference.core.cosine_schedule import cosine_factors


def test_the_factors_fall_from_one_through_a_half_to_near_zero():
    factors = cosine_factors(100)
    assert len(factors) == 100 and factors[0] == 1.0 and math.isclose(factors[50], 0.5)
    assert all(later < earlier for earlier, later in zip(factors, factors[1:]))
    assert math.isclose(factors[-1], 0.5 * (1 + math.cos(math.pi * 99 / 100))) and factors[-1] < 3e-4
