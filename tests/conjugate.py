r"""Bayesian linear regression with a closed-form posterior, the exact reference of the method tests.

The collection's network with no hidden layer, a Gaussian prior :math:`\mathcal{N}(0, s^2 I)`
on the weight and the bias and a known noise :math:`\sigma`, is the conjugate model

.. math::

    y = \Phi \beta + \varepsilon,\quad \Phi = [x, 1],\quad
    \beta \mid y \sim \mathcal{N}(m, S),\quad
    \Lambda = S^{-1} = \Phi^\top\Phi/\sigma^2 + I/s^2,\quad m = S\,\Phi^\top y/\sigma^2 .

The mean-field Gaussian closest to it in :math:`\mathrm{KL}(q \,\|\, p)` has means
:math:`m` and variances :math:`1/\Lambda_{kk}` (never larger than :math:`S_{kk}`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models import BayesianMLP, GaussianLikelihood, GaussianPrior

PRIOR_SCALE = 1.0
NOISE = 0.5
NUM_FEATURES = 2
NUM_DATA = 40


@dataclass(frozen=True)
class ConjugateProblem:
    model: BayesianMLP
    x: torch.Tensor
    y: torch.Tensor
    mean: torch.Tensor  # (d + 1,) ordered as [weight..., bias]
    cov: torch.Tensor
    meanfield_var: torch.Tensor

    def flatten(self, values: dict[str, torch.Tensor]) -> torch.Tensor:
        """Weight and bias draws ``(..., 1, d)`` and ``(..., 1)`` as ``(..., d + 1)``."""
        weight = values["layers.0.weight"]
        return torch.cat([weight.reshape(*weight.shape[:-2], -1), values["layers.0.bias"]], dim=-1)


def conjugate_problem(seed: int = 0, dtype=torch.float64) -> ConjugateProblem:
    """A fixed synthetic data set and its exact posterior, in ``dtype``."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(NUM_DATA, NUM_FEATURES, generator=generator, dtype=dtype)
    beta = torch.tensor([0.8, -0.5], dtype=dtype)
    y = x @ beta + 0.3 + NOISE * torch.randn(NUM_DATA, generator=generator, dtype=dtype)
    phi = torch.cat([x, torch.ones(NUM_DATA, 1, dtype=dtype)], dim=1)
    precision = phi.T @ phi / NOISE**2 + torch.eye(NUM_FEATURES + 1, dtype=dtype) / PRIOR_SCALE**2
    cov = torch.linalg.inv(precision)
    mean = cov @ phi.T @ y / NOISE**2
    model = BayesianMLP(
        NUM_FEATURES, 1, hidden=(), prior=GaussianPrior(PRIOR_SCALE), likelihood=GaussianLikelihood(scale=NOISE)
    )
    return ConjugateProblem(model, x, y, mean, cov, 1 / torch.diagonal(precision))
