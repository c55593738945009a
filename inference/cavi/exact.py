r"""The exact posterior of the Normal-Gamma regression (:mod:`bnn.inference.cavi.prior`), a Normal-Gamma again.

.. math::

    V_N^{-1} = V_0^{-1} + X^\top X,\qquad m_N = V_N\,(V_0^{-1} m_0 + X^\top y),\qquad
    a_N = a_0 + \tfrac{n}{2},\qquad
    b_N = b_0 + \tfrac12\big(\lVert y - X m_N\rVert^2 + (m_N - m_0)^\top V_0^{-1} (m_N - m_0)\big),

:math:`\tau \mid y \sim \mathrm{Gamma}(a_N, b_N)` and :math:`w \mid \tau, y \sim \mathcal{N}(m_N, V_N/\tau)`.
Integrating :math:`\tau` out, each weight's marginal is a Student t with :math:`2a_N` degrees of freedom,
location :math:`m_N` and scale matrix :math:`(b_N/a_N)\,V_N`, so

.. math::

    \operatorname{Cov}[w \mid y] = \frac{b_N}{a_N - 1}\,V_N \quad (a_N > 1),\qquad
    \log p(y) = -\tfrac{n}{2}\log 2\pi + \tfrac12\log\frac{|V_N|}{|V_0|}
    + a_0\log b_0 - a_N\log b_N + \log\Gamma(a_N) - \log\Gamma(a_0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.inference.cavi.data import check_regression_data
from bnn.inference.cavi.moments import WeightsAndPrecision
from bnn.inference.cavi.prior import NormalGammaPrior


@dataclass(frozen=True)
class NormalGammaPosterior(WeightsAndPrecision):
    r"""The exact posterior :math:`\mathrm{NG}(m_N, V_N, a_N, b_N)` and the log evidence :math:`\log p(y)`.

    Attributes
    ----------
    mean, covariance : torch.Tensor
        :math:`m_N` ``(d,)`` and :math:`V_N` ``(d, d)`` of :math:`w \mid \tau, y \sim \mathcal{N}(m_N, V_N/\tau)`.
    tau_shape, tau_rate : float
        :math:`a_N, b_N` of :math:`\tau \mid y \sim \mathrm{Gamma}(a_N, b_N)`; ``tau_mean``, ``tau_variance`` and
        ``weight_variance`` (:class:`~bnn.inference.cavi.moments.WeightsAndPrecision`) are the exact posterior moments.
    log_evidence : float
        :math:`\log p(y)`, the bound that every ELBO stays below.
    """

    mean: torch.Tensor
    covariance: torch.Tensor
    tau_shape: float
    tau_rate: float
    log_evidence: float

    @property
    def weight_covariance(self) -> torch.Tensor:
        r""":math:`\operatorname{Cov}[w \mid y] = b_N V_N / (a_N - 1)` (infinite when :math:`a_N \le 1`)."""
        factor = self.tau_rate / (self.tau_shape - 1) if self.tau_shape > 1 else math.inf
        return factor * self.covariance

    def weight_marginals(self) -> torch.distributions.StudentT:
        r"""Each :math:`w_k \mid y \sim t_{2a_N}\big(m_{N,k}, \sqrt{(b_N/a_N) V_{N,kk}}\big)`, batch shape ``(d,)``."""
        scale = (self.tau_rate / self.tau_shape * torch.diagonal(self.covariance)).sqrt()
        return torch.distributions.StudentT(torch.tensor(2 * self.tau_shape, dtype=self.mean.dtype), self.mean, scale)


def conditional_weight_posterior(
    x: torch.Tensor, y: torch.Tensor, prior: NormalGammaPrior
) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`(m_N, V_N)`: :math:`V_N^{-1} = V_0^{-1} + X^\top X`, :math:`m_N = V_N (V_0^{-1} m_0 + X^\top y)` (checked data)."""
    prior_precision = torch.cholesky_inverse(torch.linalg.cholesky(prior.covariance))
    covariance = torch.cholesky_inverse(torch.linalg.cholesky(prior_precision + x.T @ x))
    return covariance @ (prior_precision @ prior.mean + x.T @ y), covariance


def penalised_residual(x: torch.Tensor, y: torch.Tensor, prior: NormalGammaPrior, w: torch.Tensor) -> torch.Tensor:
    r""":math:`R(w) = \lVert y - X w\rVert^2 + (w - m_0)^\top V_0^{-1} (w - m_0)`.

    :math:`-\tau R(w) / 2` is the part of :math:`\ln p(y, w \mid \tau)` that depends on :math:`w`.
    """
    offset = w - prior.mean
    return (y - x @ w).square().sum() + offset @ torch.linalg.solve(prior.covariance, offset)


def exact_posterior(x, y, prior: NormalGammaPrior) -> NormalGammaPosterior:
    r"""The exact posterior of ``prior`` on the design matrix ``x`` ``(n, d)`` and targets ``y`` ``(n,)``.

    See the module docstring for the formulas.

    Raises
    ------
    ValueError
        For bad data or a prior that does not match ``x`` (:func:`~bnn.inference.cavi.data.check_regression_data`).
    """
    x, y = check_regression_data(x, y, prior)
    mean, covariance = conditional_weight_posterior(x, y, prior)
    shape = prior.shape + x.shape[0] / 2
    rate = prior.rate + 0.5 * penalised_residual(x, y, prior, mean).item()
    log_evidence = (
        -0.5 * x.shape[0] * math.log(2 * math.pi)
        + 0.5 * (torch.logdet(covariance) - torch.logdet(prior.covariance)).item()
        + prior.shape * math.log(prior.rate) - shape * math.log(rate)
        + math.lgamma(shape) - math.lgamma(prior.shape)
    )
    return NormalGammaPosterior(mean, covariance, shape, rate, log_evidence)
