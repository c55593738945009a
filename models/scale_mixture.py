r"""The scale mixture of two zero-mean Gaussians of Blundell et al. (2015).

.. math::

    p(w) = \pi \, \mathcal{N}(w; 0, \sigma_1^2) + (1 - \pi) \, \mathcal{N}(w; 0, \sigma_2^2)

With :math:`\sigma_2 \ll \sigma_1` it puts a spike of mass near zero and a slab of
width :math:`\sigma_1`. The log-density is computed with ``logsumexp`` over the two
log-weighted components, never in density space, where a narrow component underflows
to zero and the log-prior becomes ``-inf`` (the bug reported against the blitz
implementation of Bayes by Backprop).
"""

from __future__ import annotations

import math

import torch
from pyro.distributions import TorchDistribution, constraints


class ScaleMixtureNormal(TorchDistribution):
    r"""Elementwise two-component zero-mean Gaussian scale mixture.

    Parameters
    ----------
    pi : float
        Weight of the first component, :math:`0 < \pi < 1`.
    sigma1, sigma2 : float
        Standard deviations of the two components, both positive.
    batch_shape : torch.Size, optional
        Shape of independent elements; every element has the same mixture.
    """

    arg_constraints = {}
    support = constraints.real
    has_rsample = False

    def __init__(self, pi: float, sigma1: float, sigma2: float, batch_shape=torch.Size(), validate_args=None):
        self.pi = float(pi)
        self.sigma1 = float(sigma1)
        self.sigma2 = float(sigma2)
        super().__init__(torch.Size(batch_shape), torch.Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return ScaleMixtureNormal(self.pi, self.sigma1, self.sigma2, batch_shape)

    def _component_log_probs(self, value: torch.Tensor) -> torch.Tensor:
        """Log of weight times density for each component, stacked on a last dim of 2."""
        sigmas = value.new_tensor([self.sigma1, self.sigma2])
        log_weights = value.new_tensor([math.log(self.pi), math.log1p(-self.pi)])
        z = value.unsqueeze(-1) / sigmas
        return log_weights - 0.5 * z**2 - torch.log(sigmas) - 0.5 * math.log(2 * math.pi)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_probs = torch.logsumexp(self._component_log_probs(value), dim=-1)
        return log_probs.expand(torch.broadcast_shapes(log_probs.shape, self.batch_shape))

    def sample(self, sample_shape=torch.Size()) -> torch.Tensor:
        shape = self._extended_shape(sample_shape)
        first = torch.rand(shape) < self.pi
        scale = torch.where(first, torch.tensor(self.sigma1), torch.tensor(self.sigma2))
        return torch.randn(shape) * scale

    @property
    def mean(self) -> torch.Tensor:
        return torch.zeros(self.batch_shape)

    @property
    def variance(self) -> torch.Tensor:
        return torch.full(self.batch_shape, self.pi * self.sigma1**2 + (1 - self.pi) * self.sigma2**2)
