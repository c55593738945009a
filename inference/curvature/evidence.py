r"""The Laplace evidence at a MAP, and the noise and prior precision on one line of constant weight decay.

Around :math:`\theta_{MAP}` with posterior precision :math:`\Lambda` over :math:`D` weights,

.. math::

    \log p(\mathcal{D}) \approx \log p(\mathcal{D} \mid \theta_{MAP}) + \log p(\theta_{MAP})
    + \frac{D}{2}\log 2\pi - \frac{1}{2}\log\det\Lambda .

Take a Gaussian prior of precision :math:`\alpha P` (:math:`P` the diagonal base precision, :math:`\alpha` a scalar
multiplier), a Gaussian likelihood of noise :math:`\sigma` over :math:`nK` targets with residual sum of squares
:math:`S(\theta)`, and the GGN :math:`G / \sigma^2` (:math:`G` at unit noise), so :math:`\Lambda = G/\sigma^2 + \alpha
P`. The log joint is :math:`-[S(\theta) + \lambda\,\theta^\top P \theta] / (2\sigma^2)` plus terms free of
:math:`\theta`, so the MAP depends on :math:`(\alpha, \sigma)` only through the weight decay

.. math::

    \lambda = \alpha \sigma^2 .

On a line of constant :math:`\lambda` the MAP, :math:`S` and :math:`G` stay put and
:math:`\log\det\Lambda = \log\det(G + \lambda P) - 2D\log\sigma`, so the evidence depends on :math:`\sigma` through
:math:`-nK\log\sigma - [S + \lambda\theta^\top P\theta] / (2\sigma^2)` alone, which is largest at

.. math::

    \hat\sigma^2(\lambda) = \frac{S(\theta_\lambda) + \lambda\,\theta_\lambda^\top P\,\theta_\lambda}{nK},
    \qquad \hat\alpha(\lambda) = \lambda / \hat\sigma^2(\lambda)

(:func:`hyperparameters_on_line`): the maximum over both hyper-parameters is a one-dimensional search over
:math:`\lambda`, one MAP fit per :math:`\lambda` (:mod:`bnn.inference.curvature.evidence_search`).
The maximum-likelihood noise
:math:`S / nK` is the special case :math:`\lambda = 0`, and it has no maximum where the network can interpolate its
data (:math:`S \to 0`, :math:`\sigma \to 0`); the evidence charges the weights the fit uses through
:math:`\log\det\Lambda`. With the multiplier held (the model's own prior, :math:`\alpha = 1`), the noise on the line
is :math:`\sigma^2 = \lambda / \alpha`; with the noise held (or a likelihood without one, :math:`\sigma = 1`), the
multiplier is :math:`\alpha = \lambda / \sigma^2`.
"""

from __future__ import annotations

import math

import torch


def hyperparameters_on_line(weight_decay: float, *, squared_error: float, penalty: float, targets: int,
                            noise: float | None, multiplier: float | None) -> tuple[float, float]:
    r"""The :math:`(\alpha, \sigma)` with :math:`\alpha\sigma^2 = \lambda` that the evidence prefers (module notes).

    Parameters
    ----------
    weight_decay : float
        :math:`\lambda`.
    squared_error, penalty : float
        :math:`S(\theta_\lambda)` and :math:`\theta_\lambda^\top P \theta_\lambda` at the MAP of :math:`\lambda`
        (:math:`P` and :math:`\theta` over the weights the evidence covers).
    targets : int
        :math:`nK`.
    noise : float, optional
        ``None`` for a noise chosen here (a learned noise), else the noise held (1 for a likelihood without one).
    multiplier : float, optional
        ``None`` for a multiplier chosen here, else the multiplier held.

    Returns
    -------
    tuple of float
        :math:`(\alpha, \sigma)`.
    """
    if noise is None and multiplier is None:
        variance = (squared_error + weight_decay * penalty) / targets
        return weight_decay / variance, math.sqrt(variance)
    if noise is None:
        return multiplier, math.sqrt(weight_decay / multiplier)
    return (weight_decay / noise**2 if multiplier is None else multiplier), noise


def laplace_log_marginal_likelihood(log_likelihood: float, log_prior: float, logdet_precision: float, dim: int) -> float:
    r"""The Laplace evidence of the module docstring from its four ingredients."""
    return log_likelihood + log_prior + 0.5 * dim * math.log(2 * math.pi) - 0.5 * logdet_precision


def gaussian_log_prior(theta: torch.Tensor, precision: torch.Tensor) -> float:
    r""":math:`\log \mathcal{N}(\theta; 0, \mathrm{diag}(P)^{-1}) = \frac{1}{2}\sum_k [\log(P_k/2\pi) - P_k\theta_k^2]`."""
    return float(0.5 * ((precision / (2 * math.pi)).log() - precision * theta**2).sum())


def log_determinant(precision: torch.Tensor) -> float:
    r""":math:`\log\det\Lambda` of a dense ``(D, D)`` or diagonal ``(D,)`` precision; :math:`+\infty` when it is not
    positive definite (so that the evidence is :math:`-\infty` there)."""
    if precision.dim() == 1:
        return float(precision.log().sum()) if bool((precision > 0).all()) else math.inf
    lower, info = torch.linalg.cholesky_ex(precision)
    return float(2 * lower.diagonal().log().sum()) if info.item() == 0 else math.inf
