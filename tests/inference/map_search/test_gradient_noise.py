"""The end point's full gradient and its ratio to one batch's gradient noise (bnn.inference.map_search.gradient_noise),
on the conjugate linear regression, against the closed forms of its gradients."""

from __future__ import annotations

import pytest
import torch
from bnn.inference.map_search.gradient_noise import PERMUTATION_SEED, full_gradient
from bnn.inference.map_search.log_joint import ScaledPrior

from tests.support.conjugate import NOISE, PRIOR_SCALE, conjugate_problem

pytestmark = pytest.mark.usefixtures("float64")


def closed_form(problem, theta: torch.Tensor, batch_size: int) -> tuple[torch.Tensor, float]:
    r"""The log joint's gradient :math:`\Phi^\top(y - \Phi\beta)/\sigma^2 - \beta/s^2` and :math:`\rho` over the
    full batches of the same permutation, each batch's per-example gradient written out."""
    phi = torch.cat([problem.x, torch.ones(problem.x.shape[0], 1)], dim=1)
    per_row = phi * ((problem.y.reshape(-1) - phi @ theta) / NOISE**2)[:, None]
    rows = phi.shape[0]
    gradient = per_row.sum(0) - theta / PRIOR_SCALE**2
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(PERMUTATION_SEED))
    batches = [per_row[index].mean(0) for index in order.split(batch_size) if index.shape[0] == batch_size]
    spread = torch.stack([batch - per_row.mean(0) for batch in batches]).pow(2).sum(-1).mean().sqrt()
    return gradient, float((gradient / rows).norm() / spread)


@pytest.mark.parametrize("batch_size", [8, 12])
def test_the_gradient_and_ratio_equal_their_closed_forms(batch_size):
    """At a point off the mode, batches of 8 (five whole) and of 12 (three whole and a part left out of the spread):
    the gradient and the log-likelihood over all rows, and the ratio, to float64 rounding; the global random state
    is left as it was."""
    problem = conjugate_problem()
    theta = problem.mean + torch.tensor([0.3, -0.2, 0.1])
    state = torch.get_rng_state()
    end = full_gradient(problem.model, problem.x, problem.y, theta, {}, ScaledPrior(problem.model, 1.0), batch_size)
    assert torch.equal(torch.get_rng_state(), state)
    gradient, ratio = closed_form(problem, theta, batch_size)
    torch.testing.assert_close(end.gradient, gradient, rtol=1e-10, atol=1e-10)
    assert end.noise_ratio == pytest.approx(ratio, rel=1e-10)
    phi = torch.cat([problem.x, torch.ones(problem.x.shape[0], 1)], dim=1)
    expected = torch.distributions.Normal(phi @ theta, NOISE).log_prob(problem.y.reshape(-1)).sum()
    assert end.log_likelihood == pytest.approx(float(expected), rel=1e-12)


def test_the_ratio_is_zero_at_the_exact_mode_and_grows_away_from_it():
    """At the conjugate posterior mean the full gradient vanishes (ratio at float64 rounding); 3 posterior sd away it
    is several times one batch's noise; the entries before ``judged_from`` are left out of both."""
    problem = conjugate_problem()
    prior = ScaledPrior(problem.model, 1.0)
    at_mode = full_gradient(problem.model, problem.x, problem.y, problem.mean, {}, prior, 8)
    assert at_mode.noise_ratio < 1e-10
    away = problem.mean + 3 * problem.cov.diagonal().sqrt()
    assert full_gradient(problem.model, problem.x, problem.y, away, {}, prior, 8).noise_ratio > 1
    only_bias = full_gradient(problem.model, problem.x, problem.y, away, {}, prior, 8, judged_from=2)
    assert only_bias.gradient.shape == (1,)
    assert only_bias.noise_ratio == pytest.approx(closed_form_bias_ratio(problem, away, 8), rel=1e-10)


def closed_form_bias_ratio(problem, theta: torch.Tensor, batch_size: int) -> float:
    """:math:`\\rho` over the bias alone (the last entry)."""
    phi = torch.cat([problem.x, torch.ones(problem.x.shape[0], 1)], dim=1)
    per_row = (problem.y.reshape(-1) - phi @ theta) / NOISE**2
    rows = per_row.shape[0]
    gradient = per_row.sum() - theta[-1] / PRIOR_SCALE**2
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(PERMUTATION_SEED))
    batches = torch.stack([per_row[index].mean() for index in order.split(batch_size)])
    return float(abs(gradient / rows) / (batches - per_row.mean()).pow(2).mean().sqrt())
