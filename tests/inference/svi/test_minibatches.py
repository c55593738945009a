"""SVI's regime (bnn.inference.svi.minibatches): the full batch where its work is cheap, minibatches of a plain
training's size elsewhere, for longer by default; the fit, its record and its cost estimate agree on it."""

from __future__ import annotations

import pytest
import torch
from bnn.inference import METHODS, fit
from bnn.inference.core.full_batch_work import BATCH_SIZE, FULL_BATCH_WORK, full_batch_work
from bnn.inference.svi.minibatches import StepPlan
from bnn.inference.svi.options import DEFAULT_STEPS, JIT_MIN_STEPS, MINIBATCH_EPOCHS, MINIBATCH_STEPS, SVIOptions
from bnn.models import BayesianMLP

from tests.support.conjugate import conjugate_problem

COSTLY = BayesianMLP(784, 10, hidden=(64,), likelihood="categorical")
"""An MNIST-size network: 100 full-batch steps over 20,000 rows of it are not cheap (about 4e11 operations)."""
ROWS = 20000


def random_digits() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(ROWS, 784, generator=generator), torch.randint(10, (ROWS,), generator=generator)


def test_a_cheap_fit_keeps_the_full_batch_a_costly_one_takes_minibatches_for_longer():
    problem = conjugate_problem()
    defaults = SVIOptions.parse("svi", {})
    assert StepPlan.of(problem.model, problem.x.shape[0], defaults) == StepPlan.of(None, problem.x.shape[0], defaults)
    assert StepPlan.of(problem.model, problem.x.shape[0], defaults).batch_size == problem.x.shape[0]
    assert full_batch_work(COSTLY, ROWS, DEFAULT_STEPS) > FULL_BATCH_WORK
    plan = StepPlan.of(COSTLY, ROWS, defaults)
    assert (plan.batch_size, plan.total_steps) == (BATCH_SIZE, MINIBATCH_STEPS)  # 20,000 rows: 156 steps an epoch
    # on more rows the passes bind: 100 epochs of MNIST-1D-40k's 312 batches
    assert StepPlan.of(COSTLY, 40_000, defaults).total_steps == MINIBATCH_EPOCHS * (40_000 // BATCH_SIZE) == 31_200
    assert StepPlan.of(COSTLY, ROWS, SVIOptions.parse("svi", {"steps": 20})).total_steps == 20
    # epochs count passes over the data in the regime the default runs (few full-batch steps are cheap, but are
    # not the run a costly fit takes); steps decide the regime by their own cost; an explicit batch size wins
    for epochs in (3, 100, 200):
        plan = StepPlan.of(COSTLY, ROWS, SVIOptions.parse("svi", {"epochs": epochs}))
        assert (plan.batch_size, plan.total_steps) == (BATCH_SIZE, epochs * (ROWS // BATCH_SIZE))
    small = StepPlan.of(problem.model, problem.x.shape[0], SVIOptions.parse("svi", {"epochs": 30}))
    assert (small.batch_size, small.total_steps) == (problem.x.shape[0], 30)  # a cheap fit's epochs: full-batch steps
    assert StepPlan.of(COSTLY, ROWS, SVIOptions.parse("svi", {"steps": 3})).batch_size == ROWS  # three cheap steps
    assert StepPlan.of(COSTLY, ROWS, SVIOptions.parse("svi", {"batch_size": ROWS})).batch_size == ROWS
    assert METHODS.get("svi").cost.rows(defaults, ROWS, COSTLY) == BATCH_SIZE
    assert METHODS.get("svi").cost.rows(defaults, problem.x.shape[0], problem.model) == problem.x.shape[0]


@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # a short run
def test_a_costly_fit_runs_on_minibatches_and_its_record_says_so():
    x, y = random_digits()
    posterior = fit(COSTLY, (x, y), "svi", steps=100, num_samples=2, jit=False, progress=False)
    assert posterior.record.batch_size == BATCH_SIZE and posterior.record.steps == 100


def test_the_loss_is_compiled_for_runs_that_repay_it_unless_jit_is_given():
    model = BayesianMLP(1, 1, hidden=(3,))

    def plan(**options):
        return StepPlan.of(model, 20, SVIOptions.parse("svi", options))

    assert [plan(steps=steps).jit for steps in (JIT_MIN_STEPS - 1, JIT_MIN_STEPS)] == [False, True]
    assert plan().jit  # the default 10,000 steps
    assert plan(steps=5, jit=True).jit and not plan(steps=10_000, jit=False).jit
    assert not plan(epochs=JIT_MIN_STEPS - 1, batch_size=20).jit and plan(epochs=5, batch_size=1).jit  # 99 and 100 steps
