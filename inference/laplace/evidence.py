r"""The Laplace estimate of the log marginal likelihood, and the prior precision that maximises it.

Around :math:`\theta_{MAP}` with posterior precision :math:`\Lambda` over :math:`D` weights,

.. math::

    \log p(\mathcal{D}) \approx \log p(\mathcal{D} \mid \theta_{MAP}) + \log p(\theta_{MAP})
    + \frac{D}{2}\log 2\pi - \frac{1}{2}\log\det\Lambda .

For a Gaussian prior of precision :math:`\alpha P` (:math:`P` the diagonal base precision,
:math:`\alpha` one scalar multiplier) and a likelihood curvature :math:`H \succeq 0`,
:math:`\Lambda(\alpha) = H + \alpha P`. With :math:`e_i` the eigenvalues of
:math:`P^{-1/2} H P^{-1/2}` and :math:`a = \theta_{MAP}^\top P\,\theta_{MAP}`,

.. math::

    \log p(\mathcal{D}; \alpha) = \text{const} + \frac{D}{2}\log\alpha - \frac{\alpha a}{2}
    - \frac{1}{2}\sum_i \log(e_i + \alpha),

which is concave in :math:`\alpha`; its derivative is zero at MacKay's fixed point
:math:`\alpha = \gamma / a` with :math:`\gamma = \sum_i e_i / (e_i + \alpha)` the effective
number of parameters. :func:`optimal_prior_multiplier` finds it by bisection on
:math:`\log\alpha` (the derivative decreases monotonically), at fixed :math:`\theta_{MAP}`.
"""

from __future__ import annotations

import math

import torch

ALPHA_RANGE = (1e-8, 1e8)
BISECTIONS = 80  # brackets log(alpha) to 1e-22, far below double precision


def laplace_log_marginal_likelihood(log_likelihood: float, log_prior: float, logdet_precision: float, dim: int) -> float:
    r"""The Laplace evidence of the module docstring from its four ingredients."""
    return log_likelihood + log_prior + 0.5 * dim * math.log(2 * math.pi) - 0.5 * logdet_precision


def gaussian_log_prior(theta: torch.Tensor, precision: torch.Tensor) -> float:
    r""":math:`\log \mathcal{N}(\theta; 0, \mathrm{diag}(P)^{-1}) = \frac{1}{2}\sum_k [\log(P_k/2\pi) - P_k\theta_k^2]`."""
    return float(0.5 * ((precision / (2 * math.pi)).log() - precision * theta**2).sum())


def relative_eigenvalues(curvature: torch.Tensor, base_precision: torch.Tensor) -> torch.Tensor:
    r"""Eigenvalues :math:`e_i \ge 0` of :math:`P^{-1/2} H P^{-1/2}` for a full ``(D, D)`` or diagonal ``(D,)`` :math:`H`."""
    root = base_precision.rsqrt()
    if curvature.dim() == 1:
        relative = curvature * root**2
    else:
        relative = torch.linalg.eigvalsh(curvature * root.unsqueeze(0) * root.unsqueeze(1))
    return relative.clamp(min=0)  # round-off can push eigenvalues of a PSD matrix just below 0


def optimal_prior_multiplier(eigenvalues: torch.Tensor, weighted_square_norm: float) -> float:
    r"""The :math:`\alpha \in` :data:`ALPHA_RANGE` maximising the Laplace evidence, given :math:`e_i` and :math:`a`."""
    e = eigenvalues.double()
    dim = e.numel()

    def slope(log_alpha: float) -> float:  # twice the derivative in alpha
        alpha = math.exp(log_alpha)
        return dim / alpha - weighted_square_norm - float((1 / (e + alpha)).sum())

    low, high = (math.log(bound) for bound in ALPHA_RANGE)
    if slope(low) <= 0:
        return ALPHA_RANGE[0]
    if slope(high) >= 0:
        return ALPHA_RANGE[1]
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if slope(middle) > 0 else (low, middle)
    return math.exp(0.5 * (low + high))
