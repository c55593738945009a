"""The exact Normal-Gamma posterior against Bayes' rule on the Pyro model and the Student-t evidence."""

from __future__ import annotations

import math

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from bnn.inference.cavi import exact_posterior, normal_gamma_regression
from pyro import poutine
from scipy import stats

from tests.support.cavi import regression_problem


def gamma(shape: float, rate: float) -> dist.Gamma:
    return dist.Gamma(torch.tensor(shape, dtype=torch.float64), torch.tensor(rate, dtype=torch.float64))


def log_joint(x, y, prior, w, tau) -> float:
    """:math:`\\ln p(y, w, \\tau)` read from the Pyro model's trace."""
    conditioned = poutine.condition(normal_gamma_regression, data={"w": w, "tau": tau})
    return poutine.trace(conditioned).get_trace(x, y, prior).log_prob_sum().item()


@pytest.mark.parametrize("num_data", [1, 12, 200])
def test_bayes_rule_holds_at_random_points(num_data):
    """ln p(w, tau | y) + ln p(y) = ln p(y, w, tau) to round-off at points around the posterior: mean, V_N, a_N, b_N
    and the evidence all enter."""
    x, y, prior = regression_problem(num_data)
    posterior = exact_posterior(x, y, prior)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        tau = torch.tensor(posterior.tau_mean * math.exp(0.5 * torch.randn(1, generator=generator).item()), dtype=torch.float64)
        w = posterior.mean + torch.randn(3, generator=generator, dtype=torch.float64)
        log_density = (
            gamma(posterior.tau_shape, posterior.tau_rate).log_prob(tau)
            + dist.MultivariateNormal(posterior.mean, covariance_matrix=posterior.covariance / tau).log_prob(w)
        ).item()
        assert log_density + posterior.log_evidence == pytest.approx(log_joint(x, y, prior, w, tau), rel=1e-10, abs=1e-9)


def test_log_evidence_is_the_student_t_marginal_of_y():
    """y ~ t_{2 a0}(X m0, (b0/a0)(I + X V0 X^T)) with tau and w integrated out (scipy's multivariate t)."""
    x, y, prior = regression_problem()
    scale = prior.rate / prior.shape * (torch.eye(x.shape[0], dtype=torch.float64) + x @ prior.covariance @ x.T)
    expected = stats.multivariate_t(loc=(x @ prior.mean).numpy(), shape=scale.numpy(), df=2 * prior.shape).logpdf(y.numpy())
    assert exact_posterior(x, y, prior).log_evidence == pytest.approx(expected, rel=1e-12)


def test_weight_marginals_match_monte_carlo_draws_of_the_joint():
    """Draws of (tau, w | tau) from the posterior: their sample variance of w matches weight_variance, and the Student-t
    marginals' variance equals it; within 5 standard errors of a variance, sqrt(Var[(w - m)^2] / S)."""
    x, y, prior = regression_problem()
    posterior = exact_posterior(x, y, prior)
    pyro.set_rng_seed(3)
    num_draws = 200_000
    tau = gamma(posterior.tau_shape, posterior.tau_rate).sample((num_draws,))
    zero = torch.zeros(3, dtype=torch.float64)
    noise = dist.MultivariateNormal(zero, covariance_matrix=posterior.covariance).sample((num_draws,))
    w = posterior.mean + noise / tau.sqrt()[:, None]
    squared = (w - posterior.mean).square()
    standard_error = squared.std(0) / np.sqrt(num_draws)
    assert ((squared.mean(0) - posterior.weight_variance).abs() < 5 * standard_error).all()
    assert torch.allclose(posterior.weight_marginals().variance, posterior.weight_variance, rtol=1e-12)
