"""The MAP fitted on minibatches (bnn.inference.map_search.minibatch_map): which fits take it, that it finds the
conjugate model's exact MAP, that its check flags a run too short or too slow, and how a learned noise ends."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from bnn.inference import fit
from bnn.inference.core.full_batch_work import BATCH_SIZE, FULL_BATCH_WORK, full_batch_work
from bnn.inference.map_search import minibatch_map
from bnn.inference.map_search.map_estimate import find_map, map_batch_rows
from bnn.inference.map_search.minibatch_map import EPOCHS, MOST_STEPS, minibatch_epochs
from bnn.models import BayesianMLP

from bnn.runtime.seeding import seeded
from tests.support.conjugate import conjugate_problem

pytestmark = pytest.mark.usefixtures("float64")
FIT = dict(steps=1000, lr=0.01, tolerance=0.1, progress=False)


def random_classification(rows: int, features: int, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(rows, features, generator=generator), torch.randint(classes, (rows,), generator=generator)


def test_a_cheap_fit_takes_the_full_batch_and_a_costly_one_minibatches():
    """The regime follows the counted work of the full-batch fit alone: the conjugate model's 40 rows are cheap, an
    MNIST-size network on 2,000 rows is not; an explicit batch size wins, capped at the rows."""
    problem = conjugate_problem()
    assert map_batch_rows(problem.model, problem.x, problem.y, 1000, None) == problem.x.shape[0]
    model = BayesianMLP(784, 10, hidden=(512, 512), likelihood="categorical")
    x, y = random_classification(2000, 784, 10)
    assert full_batch_work(model, x.shape[0], 1000) > FULL_BATCH_WORK
    assert map_batch_rows(model, x, y, 1000, None) == BATCH_SIZE
    assert map_batch_rows(model, x, y, 1000, 5000) == 2000
    assert map_batch_rows(problem.model, problem.x, problem.y, 1000, 8) == 8


def test_a_costly_network_with_hierarchical_priors_keeps_the_full_batch():
    """A MAP fit does not cover hierarchical scales on minibatches: such a network keeps the full-batch fit."""
    model = BayesianMLP(784, 10, hidden=(512, 512), likelihood="categorical", prior="layer-scale")
    x, y = random_classification(2000, 784, 10)
    assert map_batch_rows(model, x, y, 1000, None) == 2000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_minibatch_map_of_the_conjugate_model_is_its_posterior_mean(seed):
    """Batches of 8 of the 40 rows, 200 epochs at a peak rate of 0.05: the MAP within 0.02 posterior standard
    deviations of the exact one (about 0.003 at seed 0; the cosine decay leaves the last steps' noise far below the
    posterior's width), converged by its own check, and the record of it says no polish ran."""
    problem = conjugate_problem()
    with seeded(seed), warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = find_map(problem.model, problem.x, problem.y, **FIT, batch_size=8, epochs=200, batch_lr=0.05)
    error = (estimate.theta - problem.mean) / problem.cov.diagonal().sqrt()
    assert error.abs().max() < 0.02
    assert estimate.minibatch and estimate.converged
    assert estimate.polish == "none: minibatch Adam, 200 epochs of 8 rows"
    assert math.isnan(estimate.newton_decrement)


@pytest.mark.parametrize("epochs, batch_lr", [(20, 1e-4), (2, 0.05)])
def test_a_run_too_slow_or_too_short_for_its_data_is_flagged(epochs, batch_lr):
    """A rate a five-hundredth of the one above, or a hundredth of its epochs: still far from the mode (over 10
    posterior standard deviations), and the fit says so and names the options to raise."""
    problem = conjugate_problem()
    with seeded(0), pytest.warns(RuntimeWarning, match="stopped before it settled.*raise map_epochs"):
        estimate = find_map(problem.model, problem.x, problem.y, **FIT, batch_size=8, epochs=epochs, batch_lr=batch_lr)
    assert not estimate.converged and estimate.stalled
    assert ((estimate.theta - problem.mean) / problem.cov.diagonal().sqrt()).abs().max() > 10


def test_a_learned_noise_ends_at_its_maximum_likelihood_value_given_the_weights():
    """sigma^2 = mean squared residual over all rows at the weights the minibatch fit returns."""
    problem = conjugate_problem()
    problem.model.likelihood = problem.model.likelihood.__class__(scale=None)
    with seeded(0):
        estimate = find_map(problem.model, problem.x, problem.y, **FIT, batch_size=8, epochs=200, batch_lr=0.05)
    weight, bias = estimate.theta[:2], estimate.theta[2]
    residual = problem.y - (problem.x @ weight + bias)
    torch.testing.assert_close(estimate.latents["sigma"].squeeze(), residual.pow(2).mean().sqrt(), rtol=1e-6, atol=0)


def test_a_rate_that_overflows_names_the_minibatch_rate():
    """A first step of 1e20 takes the float32 residuals past their largest square: the error names the option."""
    problem = conjugate_problem()
    with seeded(0), pytest.raises(FloatingPointError, match=r"at Adam step 1; lower map_batch_lr \(now 1e\+20\)"):
        find_map(problem.model, problem.x, problem.y, **FIT, batch_size=8, epochs=5, batch_lr=1e20)


def test_the_map_method_takes_the_minibatch_options_and_its_record_says_which_fit_ran():
    problem = conjugate_problem()
    posterior = fit(problem.model, (problem.x, problem.y), "map", map_batch_size=8, map_epochs=200, map_batch_lr=0.05,
                    seed=0, progress=False)
    assert posterior.record.map_polish == "none: minibatch Adam, 200 epochs of 8 rows"
    full = fit(problem.model, (problem.x, problem.y), "map", seed=0, progress=False)
    assert full.record.map_polish == "levenberg-marquardt"


def test_the_default_length_is_200_epochs_or_32000_steps_whichever_comes_first():
    """Small data take :data:`EPOCHS` epochs (MNIST-1D's 4,000 rows: 32 steps an epoch), large data
    :data:`MOST_STEPS` steps in whole epochs (UCI protein's 41,157 rows: 322 steps an epoch, 100 epochs)."""
    assert (EPOCHS, MOST_STEPS) == (200, 32_000)
    assert minibatch_epochs(4000, 128) == 200
    assert minibatch_epochs(41157, 128) == 100
    assert minibatch_epochs(40000, 128) == 103  # 313 steps an epoch: 32,239 steps
    assert minibatch_epochs(10_000_000, 128) == 1


def test_a_fit_without_map_epochs_takes_the_default_length(monkeypatch):
    """``map_epochs=None`` (the default) reaches :func:`minibatch_epochs`: with the step cap lowered to 50, the
    conjugate model's 40 rows in batches of 8 (5 steps an epoch) run 10 epochs."""
    monkeypatch.setattr(minibatch_map, "MOST_STEPS", 50)
    problem = conjugate_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 50 steps do not flatten; the length is what is checked
        posterior = fit(problem.model, (problem.x, problem.y), "map", map_batch_size=8, map_batch_lr=0.05, seed=0,
                        progress=False)
    assert posterior.record.map_polish == "none: minibatch Adam, 10 epochs of 8 rows"


def test_a_flagged_minibatch_map_s_record_names_the_minibatch_fit_and_its_options():
    """The record's problem of a minibatch MAP too short to flatten says how it was fitted and what to raise, not the
    polish's advice (it had none)."""
    problem = conjugate_problem()
    with pytest.warns(RuntimeWarning, match="stopped before it settled"):
        record = fit(problem.model, (problem.x, problem.y), "map", map_batch_size=8, map_epochs=2, map_batch_lr=0.05,
                     seed=0, progress=False).record
    assert record.problems() == [
        f"the MAP did not converge: fitted on minibatches (minibatch Adam, 2 epochs of 8 rows), it stopped before it "
        f"settled (gradient norm {record.map_grad_norm:.3g} over all rows, {record.map_noise_ratio:.2g} of one batch's "
        "gradient noise); raise map_epochs "
        "(--map-epochs) or map_batch_lr"]
