r"""SWAG's check of its Gaussian against the exact effective number of parameters of the conjugate model.

For Bayesian linear regression with a known noise (tests/support/conjugate.py) the training log-likelihood is exactly
quadratic, :math:`L(\theta) = L(\bar\theta) + g^\top(\theta - \bar\theta) - \tfrac12(\theta - \bar\theta)^\top J
(\theta - \bar\theta)` with :math:`J = \Phi^\top\Phi / \sigma^2`, so under any Gaussian :math:`\mathcal{N}(\bar\theta,
\Sigma)` the estimate :math:`\hat p_D` is unbiased for :math:`\operatorname{tr}(J\Sigma)`; at the exact posterior that
is :math:`\operatorname{tr}(J(J + I/s^2)^{-1}) < D`, and a Gaussian fifty times as wide exceeds :math:`D`.
"""

from __future__ import annotations

import torch
from bnn.inference.swag.effective_parameters import EXCESS_Z, effective_parameters, too_wide

from tests.conftest import default_dtype
from tests.support.conjugate import NOISE, conjugate_problem

DRAWS = 4000


def gaussian_members(problem, covariances: list[torch.Tensor]) -> tuple[dict, dict]:
    """``DRAWS`` draws of each member's Gaussian around the exact posterior mean ``(C, S, ...)``, and the means
    ``(C, 1, ...)``, as the model's sites (the weight ``(1, d)``, then the bias)."""
    generator = torch.Generator().manual_seed(0)
    flat = torch.stack([problem.mean + torch.randn(DRAWS, len(problem.mean), generator=generator,
                                                   dtype=problem.mean.dtype) @ torch.linalg.cholesky(cov).T
                        for cov in covariances])  # (C, S, d + 1)
    means = problem.mean.expand(len(covariances), 1, -1)

    def as_sites(values: torch.Tensor) -> dict[str, torch.Tensor]:
        weight, bias = values[..., :-1], values[..., -1:]
        return {"layers.0.weight": weight.unsqueeze(-2), "layers.0.bias": bias}

    return as_sites(flat), as_sites(means)


def test_the_estimate_is_the_exact_trace_and_a_gaussian_wider_than_the_posterior_is_flagged():
    with default_dtype(torch.float64):
        problem = conjugate_problem()
        samples, means = gaussian_members(problem, [problem.cov, 50 * problem.cov])
        p_d, errors = effective_parameters(problem.model, problem.x, problem.y, samples, means, draws=DRAWS)
    phi = torch.cat([problem.x, torch.ones(len(problem.x), 1, dtype=problem.x.dtype)], dim=1)
    gauss_newton = phi.T @ phi / NOISE**2
    exact = [torch.trace(gauss_newton @ problem.cov).item() * factor for factor in (1, 50)]
    latent_values = len(problem.mean)
    assert exact[0] < latent_values < exact[1]  # the posterior's p_D is below D; fifty times its width is above
    for estimate, error, truth in zip(p_d, errors, exact):
        assert abs(estimate - truth) < 4 * error, (estimate, error, truth)
    assert too_wide(p_d, errors, latent_values) == [1]


def test_an_estimate_above_the_bound_by_less_than_its_noise_is_not_flagged():
    assert too_wide([12.0, 25.0], [1.0, 5.0], 11) == []  # within EXCESS_Z standard errors of D
    assert too_wide([11.0 + EXCESS_Z * 1.0 + 0.1], [1.0], 11) == [0]
