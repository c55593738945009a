r"""The closed-form ELBO of a factorised :math:`q(w)\,q(\tau)` for the Normal-Gamma regression.

With :math:`q(w) = \mathcal{N}(\mu, \Sigma)`, :math:`q(\tau) = \mathrm{Gamma}(a, b)`,
:math:`\mathbb{E}[\tau] = a/b`, :math:`\mathbb{E}[\ln\tau] = \psi(a) - \ln b`, and
:math:`\mathbb{E}_{q(w)}[R(w)] = R(\mu) + \operatorname{tr}\big((X^\top X + V_0^{-1})\Sigma\big)` for
:math:`R(w) = \lVert y - Xw\rVert^2 + (w - m_0)^\top V_0^{-1}(w - m_0)`,

.. math::

    \mathcal{L}(q) &= \mathbb{E}_q[\ln p(y, w, \tau)] + \mathbb{H}[q(w)] + \mathbb{H}[q(\tau)] \\
    &= \tfrac{n+d}{2}\big(\mathbb{E}[\ln\tau] - \ln 2\pi\big) - \tfrac12\ln|V_0|
       - \tfrac{\mathbb{E}[\tau]}{2}\,\mathbb{E}_{q(w)}[R(w)] \\
    &\quad + a_0\ln b_0 - \ln\Gamma(a_0) + (a_0 - 1)\,\mathbb{E}[\ln\tau] - b_0\,\mathbb{E}[\tau] \\
    &\quad + \tfrac{d}{2}(1 + \ln 2\pi) + \tfrac12\ln|\Sigma|
       + a - \ln b + \ln\Gamma(a) + (1 - a)\,\psi(a),

a lower bound on :math:`\ln p(y)` that is tight only when :math:`q` is the exact posterior.
"""

from __future__ import annotations

import math

import torch
from bnn.inference.cavi.exact import penalised_residual
from bnn.inference.cavi.prior import NormalGammaPrior


def expected_penalised_residual(
    x: torch.Tensor, y: torch.Tensor, prior: NormalGammaPrior, mean: torch.Tensor, covariance: torch.Tensor
) -> torch.Tensor:
    r""":math:`\mathbb{E}_{\mathcal{N}(\mu, \Sigma)}[R(w)] = R(\mu) + \operatorname{tr}\big((X^\top X + V_0^{-1})\Sigma\big)`."""
    precision = x.T @ x + torch.linalg.inv(prior.covariance)
    return penalised_residual(x, y, prior, mean) + (precision * covariance).sum()


def meanfield_elbo(
    x: torch.Tensor, y: torch.Tensor, prior: NormalGammaPrior,
    weight_mean: torch.Tensor, weight_covariance: torch.Tensor, tau_shape: float, tau_rate: float,
) -> float:
    r""":math:`\mathcal{L}(q)` for :math:`q(w) = \mathcal{N}(\mu, \Sigma)`, :math:`q(\tau) = \mathrm{Gamma}(a, b)`.

    See the module docstring for the terms.

    ``x`` ``(n, d)`` and ``y`` ``(n,)`` are float64 data already checked against ``prior``.
    """
    n, d = x.shape
    tau_mean = tau_shape / tau_rate
    digamma = torch.special.digamma(torch.tensor(tau_shape, dtype=torch.float64)).item()
    expected_log_tau = digamma - math.log(tau_rate)
    expected_log_joint = (
        0.5 * (n + d) * (expected_log_tau - math.log(2 * math.pi))
        - 0.5 * torch.logdet(prior.covariance).item()
        - 0.5 * tau_mean * expected_penalised_residual(x, y, prior, weight_mean, weight_covariance).item()
        + prior.shape * math.log(prior.rate) - math.lgamma(prior.shape)
        + (prior.shape - 1) * expected_log_tau - prior.rate * tau_mean
    )
    weight_entropy = 0.5 * d * (1 + math.log(2 * math.pi)) + 0.5 * torch.logdet(weight_covariance).item()
    tau_entropy = tau_shape - math.log(tau_rate) + math.lgamma(tau_shape) + (1 - tau_shape) * digamma
    return expected_log_joint + weight_entropy + tau_entropy
