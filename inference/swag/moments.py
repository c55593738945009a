r"""SWAG's Gaussian (Maddox et al. 2019): the running moments of SGD's iterates and draws from the Gaussian they define.

From the iterates :math:`\theta_1, \dots, \theta_n` collected along SGD at a constant rate (one per epoch in
:mod:`bnn.inference.swag.fit`), with the running mean :math:`\bar\theta_i = \tfrac1i\sum_{j \le i}\theta_j` and second moment
:math:`\overline{\theta^2}_i` (elementwise), and the deviations :math:`d_i = \theta_i - \bar\theta_i` of the last
:math:`K` iterates as the columns of :math:`\hat D` (:math:`D \times K`):

.. math::

    \Sigma_{diag} = \operatorname{diag}\big(\overline{\theta^2} - \bar\theta^2\big),\qquad
    \Sigma = \tfrac12\Sigma_{diag} + \tfrac{1}{2(K - 1)}\hat D\hat D^\top,

and a draw is :math:`\theta = \bar\theta + \tfrac{1}{\sqrt2}\Sigma_{diag}^{1/2} z_1 + \tfrac{1}{\sqrt{2(K - 1)}}\hat D z_2`
with :math:`z_1 \sim \mathcal{N}(0, I_D)`, :math:`z_2 \sim \mathcal{N}(0, I_K)`, whose covariance is exactly
:math:`\Sigma`. Several chains (MultiSWAG's members) are a leading dimension ``(C, D)``.
"""

from __future__ import annotations

import torch


class SWAGMoments:
    """The running moments of ``C`` chains' iterates ``(C, D)`` and the last ``rank`` deviations."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.count = 0
        self.mean: torch.Tensor | None = None
        self.second: torch.Tensor | None = None
        self.deviations: list[torch.Tensor] = []

    def collect(self, theta: torch.Tensor) -> None:
        """Add the iterates ``theta`` ``(C, D)``."""
        self.count += 1
        if self.mean is None:
            self.mean, self.second = theta.clone(), theta.square()
        else:
            self.mean = self.mean + (theta - self.mean) / self.count
            self.second = self.second + (theta.square() - self.second) / self.count
        self.deviations = [*self.deviations, theta - self.mean][-self.rank:]

    def finite(self) -> bool:
        """Whether the mean, the second moment and the deviations kept are all finite."""
        return all(torch.isfinite(value).all() for value in (self.mean, self.second, *self.deviations))

    def diagonal(self) -> torch.Tensor:
        r""":math:`\overline{\theta^2} - \bar\theta^2`, ``(C, D)``, clamped at 0 (rounding)."""
        return (self.second - self.mean.square()).clamp_min(0)

    def low_rank(self) -> torch.Tensor:
        r""":math:`\hat D`, ``(C, D, K)`` for the :math:`K` deviations kept."""
        return torch.stack(self.deviations, dim=-1)

    def covariance(self) -> torch.Tensor:
        r""":math:`\Sigma`, ``(C, D, D)`` (for checks on small networks: it is dense)."""
        deviations = self.low_rank()
        kept = deviations.shape[-1]
        return torch.diag_embed(self.diagonal()) / 2 + deviations @ deviations.transpose(-1, -2) / (2 * (kept - 1))

    def sample(self, num_samples: int) -> torch.Tensor:
        """``num_samples`` draws of each chain's Gaussian, ``(C, num_samples, D)`` (the global torch generator)."""
        deviations = self.low_rank()
        chains, dim, kept = deviations.shape
        diagonal = torch.randn(chains, num_samples, dim, dtype=self.mean.dtype) * (self.diagonal() / 2).sqrt()[:, None]
        low_rank = torch.einsum("cdk,csk->csd", deviations, torch.randn(chains, num_samples, kept, dtype=self.mean.dtype))
        return self.mean[:, None] + diagonal + low_rank / (2 * (kept - 1)) ** 0.5
