"""The closed-form mean-field ELBO against a Monte Carlo estimate through the Pyro model."""

from __future__ import annotations

import pyro
import pyro.distributions as dist
import pytest
import torch
from bnn.inference.cavi import fit_cavi, meanfield_elbo, normal_gamma_regression
from pyro import poutine

NUM_DRAWS = 100_000


def monte_carlo_elbo(x, y, prior, mean, covariance, tau_shape, tau_rate) -> tuple[float, float]:
    """The average of ln p(y, w, tau) - ln q(w) - ln q(tau) over draws of q, the joint read from the Pyro model's trace,
    and its standard error sd / sqrt(S)."""
    q_tau = dist.Gamma(torch.tensor(tau_shape, dtype=torch.float64), torch.tensor(tau_rate, dtype=torch.float64))
    q_w = dist.MultivariateNormal(mean, covariance_matrix=covariance)
    tau, w = q_tau.sample((NUM_DRAWS,)), q_w.sample((NUM_DRAWS,))
    with pyro.plate("draws", NUM_DRAWS, dim=-2):
        conditioned = poutine.condition(normal_gamma_regression, data={"tau": tau[:, None], "w": w[:, None]})
        trace = poutine.trace(conditioned).get_trace(x, y, prior)
    trace.compute_log_prob()
    log_joint = sum(trace.nodes[name]["log_prob"].reshape(NUM_DRAWS, -1).sum(-1) for name in ("tau", "w", "obs"))
    log_ratio = log_joint - q_w.log_prob(w) - q_tau.log_prob(tau)
    return log_ratio.mean().item(), (log_ratio.std() / NUM_DRAWS**0.5).item()


@pytest.mark.parametrize("where", ["fixed point", "elsewhere"])
def test_closed_form_elbo_equals_monte_carlo_within_4_standard_errors(problem, where):
    x, y, prior = problem
    if where == "fixed point":
        result = fit_cavi(x, y, prior)
        q = (result.weight_mean, result.weight_covariance, result.tau_shape, result.tau_rate)
    else:  # an arbitrary factorised q: a shifted mean, a correlated covariance, a Gamma off the CAVI one
        q = (torch.tensor([0.2, 0.1, -0.4], dtype=torch.float64),
             torch.tensor([[0.3, -0.1, 0.0], [-0.1, 0.2, 0.05], [0.0, 0.05, 0.5]], dtype=torch.float64), 3.0, 0.7)
    pyro.set_rng_seed(0)
    estimate, standard_error = monte_carlo_elbo(x, y, prior, *q)
    closed_form = meanfield_elbo(x, y, prior, *q)
    assert abs(closed_form - estimate) < 4 * standard_error, (closed_form, estimate, standard_error)
