"""The step plans: which steps explore, which are kept, and each step's size relative to the first."""

from __future__ import annotations

import math

import pytest
from bnn.inference.sgmcmc.options import CSGLDOptions
from bnn.inference.sgmcmc.step_plans import BurnInPlan, CyclicalPlan


def test_a_burn_in_plan_keeps_every_thin_th_step_after_the_burn_in_and_never_explores():
    plan = BurnInPlan(num_warmup=5, num_samples=4, thin=3)
    assert plan.total == 17 and plan.num_samples == 4
    assert [step for step in range(plan.total) if plan.keeps(step)] == [7, 10, 13, 16]
    assert [step for step in range(plan.total) if plan.adapts(step)] == [0, 1, 2, 3, 4]
    assert not any(plan.explores(step) for step in range(plan.total))
    decaying = BurnInPlan(5, 4, 3, polynomial=True, offset=10.0, power=0.6)
    assert decaying.step_factor(7) == pytest.approx(1.7**-0.6) and plan.step_factor(7) == 1.0


def test_a_cycle_explores_its_first_share_then_keeps_every_thin_th_step_of_the_rest():
    plan = CyclicalPlan(num_cycles=3, cycle_length=10, exploration=0.55, thin=2)
    assert plan.total == 30 and plan.sampling_start == 6 and plan.draws_per_cycle == 2 and plan.num_samples == 6
    assert [step for step in range(plan.total) if plan.keeps(step)] == [7, 9, 17, 19, 27, 29]
    assert [step for step in range(10) if plan.explores(step)] == [0, 1, 2, 3, 4, 5]
    assert plan.explores(20) and not plan.explores(26) and not any(plan.adapts(step) for step in range(30))
    assert plan.describe() == "3 cycles x 10"
    assert [step for step in range(plan.total) if plan.restarts(step)] == [10, 20]
    assert not any(BurnInPlan(5, 4, 3).restarts(step) for step in range(17))


def test_a_cycle_steps_down_a_cosine_and_restarts_at_the_first_step():
    plan = CyclicalPlan(num_cycles=2, cycle_length=8, exploration=0.5, thin=1)
    expected = [(math.cos(math.pi * j / 8) + 1) / 2 for j in range(8)]
    assert [plan.step_factor(step) for step in range(16)] == pytest.approx(expected * 2)
    assert plan.step_factor(0) == plan.step_factor(8) == 1.0 and plan.step_factor(4) == pytest.approx(0.5)


def test_a_thin_that_leaves_the_last_steps_of_a_sampling_part_unkept_keeps_none_of_them():
    plan = CyclicalPlan(num_cycles=2, cycle_length=10, exploration=0.3, thin=3)  # 7 sampling steps: 2 draws
    assert [step for step in range(plan.total) if plan.keeps(step)] == [5, 8, 15, 18]


@pytest.mark.parametrize("options", [dict(num_cycles=1, cycle_length=10, exploration=0.8, thin=1),
                                     dict(num_cycles=2, cycle_length=100, exploration=0.5, thin=30)])
def test_options_that_keep_fewer_than_four_draws_are_refused_with_the_count_and_the_fix(options):
    with pytest.raises(ValueError, match=r"keep \d draws per chain; R-hat needs 4: raise cycle_length or num_cycles"):
        CSGLDOptions(**options)
