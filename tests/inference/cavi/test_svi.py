"""SVI in the CAVI family: bounded by CAVI's optimum, better than its start, reproducible and isolated."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.inference.cavi import fit_cavi, fit_svi, meanfield_elbo

from tests.support.cavi import regression_problem

STEPS = 200


@pytest.fixture(scope="module")
def fitted():
    x, y, prior = regression_problem()
    return x, y, prior, fit_svi(x, y, prior, steps=STEPS, seed=0)


def test_elbo_rises_from_the_start_and_stays_below_the_cavi_optimum(fitted):
    """CAVI's fixed point maximises the ELBO over this family, so no SVI result exceeds it (a bound, not a tolerance)."""
    x, y, prior, result = fitted
    start = meanfield_elbo(x, y, prior, prior.mean, 0.01 * torch.eye(3, dtype=torch.float64), prior.shape, prior.rate)
    assert start < result.elbo <= fit_cavi(x, y, prior).elbo[-1]
    assert len(result.elbo_estimates) == STEPS


def test_same_seed_same_fit_and_the_global_store_is_untouched(fitted):
    x, y, prior, result = fitted
    pyro.clear_param_store()
    pyro.param("w_loc", torch.ones(3))
    again = fit_svi(x, y, prior, steps=STEPS, seed=0)
    assert again.elbo_estimates == result.elbo_estimates and torch.equal(again.weight_mean, result.weight_mean)
    assert torch.equal(pyro.param("w_loc"), torch.ones(3)) and list(pyro.get_param_store().keys()) == ["w_loc"]
    pyro.clear_param_store()


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(steps=0), "steps must be a positive integer"),
        (dict(lr=0.0), "lr must be a positive number"),
        (dict(final_lr_ratio=1.5), r"final_lr_ratio must lie in \(0, 1\]"),
        (dict(seed=-1), "seed must be a non-negative integer"),
    ],
)
def test_bad_options(fitted, options, message):
    x, y, prior, _ = fitted
    with pytest.raises(ValueError, match=message):
        fit_svi(x, y, prior, **options)
