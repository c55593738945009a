"""CAVI against the exact Normal-Gamma posterior: monotone ELBO, exact means, smaller variances, a bound on ln p(y)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bnn.inference.cavi import exact_posterior, fit_cavi

from tests.support.cavi import regression_problem

ROUND_OFF = 1e-13  # relative: float64 ELBO sums of a few hundred terms


@pytest.mark.parametrize("num_data", [1, 12, 200])
@pytest.mark.parametrize("init_tau_mean", [None, 1e-3, 1e3])
def test_elbo_never_decreases(num_data, init_tau_mean):
    x, y, prior = regression_problem(num_data)
    elbo = np.array(fit_cavi(x, y, prior, init_tau_mean=init_tau_mean).elbo)
    assert len(elbo) > 2
    assert (np.diff(elbo) >= -ROUND_OFF * np.abs(elbo[1:])).all(), np.diff(elbo)


@pytest.mark.parametrize("num_data", [1, 12, 200])
def test_fixed_point_has_the_exact_means_and_smaller_variances(num_data):
    """At the fixed point E_q[w] = m_N and E_q[tau] = a_N / b_N exactly, and the variances shrink by the known factors
    (a_N - 1) / a_N for w and a_N / (a_N + d/2) for tau."""
    x, y, prior = regression_problem(num_data)
    result, exact = fit_cavi(x, y, prior), exact_posterior(x, y, prior)
    assert result.converged
    assert torch.allclose(result.weight_mean, exact.mean, rtol=1e-12, atol=1e-14)
    assert result.tau_mean == pytest.approx(exact.tau_mean, rel=1e-10)
    assert (result.weight_variance < exact.weight_variance).all()
    assert torch.allclose(result.weight_variance / exact.weight_variance,
                          torch.full((3,), (exact.tau_shape - 1) / exact.tau_shape, dtype=torch.float64), rtol=1e-9)
    assert result.tau_variance / exact.tau_variance == pytest.approx(exact.tau_shape / (exact.tau_shape + 1.5), rel=1e-9)


def test_elbo_stays_below_the_log_evidence(problem):
    x, y, prior = problem
    result, exact = fit_cavi(x, y, prior), exact_posterior(x, y, prior)
    assert max(result.elbo) < exact.log_evidence


def test_stopping_short_warns_and_says_so(problem):
    x, y, prior = problem
    with pytest.warns(RuntimeWarning, match="raise max_iterations"):
        result = fit_cavi(x, y, prior, max_iterations=2, init_tau_mean=1e-3)
    assert not result.converged and result.iterations == 2


def test_data_as_numpy_lists_give_the_same_fit(problem):
    x, y, prior = problem
    assert fit_cavi(x.numpy(), y.tolist(), prior).elbo == fit_cavi(x, y, prior).elbo
