"""The Laplace evidence pieces of bnn.inference.curvature.evidence, against the exact evidence of Bayesian linear
regression."""

from __future__ import annotations

import math

import pytest
import torch
from bnn.inference.curvature.evidence import hyperparameters_on_line, log_determinant
from scipy.optimize import minimize_scalar

from tests.support.conjugate import PRIOR_SCALE


def exact_log_evidence(phi: torch.Tensor, y: torch.Tensor, noise: float, prior_variance: float) -> float:
    cov = noise**2 * torch.eye(phi.shape[0]) + prior_variance * phi @ phi.T
    return torch.distributions.MultivariateNormal(torch.zeros(phi.shape[0]), cov).log_prob(y).item()


@pytest.mark.parametrize("weight_decay", [1e-3, 0.25, 40.0])
def test_the_noise_on_a_line_of_constant_weight_decay_maximises_the_exact_evidence(conjugate, weight_decay):
    r"""On :math:`\alpha\sigma^2 = \lambda` the prior variance is :math:`s^2\sigma^2/\lambda`, so the exact evidence is
    :math:`\mathcal{N}(y; 0, \sigma^2 (I + s^2 \Phi\Phi^\top / \lambda))`, largest at
    :math:`\sigma^2 = y^\top (I + s^2\Phi\Phi^\top/\lambda)^{-1} y / n`; the closed form from the ridge MAP must agree."""
    phi = torch.cat([conjugate.x, torch.ones(conjugate.x.shape[0], 1)], dim=1)
    y, n, base = conjugate.y, conjugate.x.shape[0], 1 / PRIOR_SCALE**2
    theta = torch.linalg.solve(phi.T @ phi + weight_decay * base * torch.eye(3), phi.T @ y)  # the MAP of lambda
    multiplier, noise = hyperparameters_on_line(weight_decay, squared_error=float(((y - phi @ theta) ** 2).sum()),
                                                penalty=float(base * theta @ theta), targets=n, noise=None, multiplier=None)
    gram = torch.eye(n) + PRIOR_SCALE**2 * phi @ phi.T / weight_decay
    assert noise**2 == pytest.approx(float(y @ torch.linalg.solve(gram, y)) / n, rel=1e-12)
    assert multiplier * noise**2 == pytest.approx(weight_decay, rel=1e-14)
    along = minimize_scalar(lambda log_noise: -exact_log_evidence(phi, y, math.exp(log_noise),
                                                                  PRIOR_SCALE**2 * math.exp(2 * log_noise) / weight_decay),
                            bracket=(-3.0, 1.0), tol=1e-12)
    assert noise == pytest.approx(math.exp(along.x), rel=1e-6)


def test_a_held_noise_or_multiplier_fixes_the_other_on_the_line():
    common = dict(squared_error=3.0, penalty=2.0, targets=10)
    assert hyperparameters_on_line(0.5, noise=None, multiplier=2.0, **common) == (2.0, 0.5)
    assert hyperparameters_on_line(0.5, noise=0.5, multiplier=None, **common) == (2.0, 0.5)


def test_the_log_determinant_and_its_refusal_of_a_precision_that_is_not_positive_definite():
    root = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    precision = root @ root.T + torch.eye(4, dtype=torch.float64)
    assert log_determinant(precision) == pytest.approx(torch.linalg.slogdet(precision)[1].item(), rel=1e-12)
    assert log_determinant(precision.diagonal()) == pytest.approx(precision.diagonal().log().sum().item(), rel=1e-12)
    assert log_determinant(-precision) == math.inf and log_determinant(-precision.diagonal()) == math.inf
