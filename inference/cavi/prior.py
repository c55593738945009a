r"""The Normal-Gamma prior of Bayesian linear regression with an unknown noise precision.

.. math::

    \tau \sim \mathrm{Gamma}(a_0, b_0),\qquad
    w \mid \tau \sim \mathcal{N}\big(m_0,\; V_0 / \tau\big),\qquad
    y \mid w, \tau \sim \mathcal{N}\big(X w,\; I / \tau\big),

with :math:`\tau` the noise precision (rate :math:`b_0`, so :math:`\mathbb{E}[\tau] = a_0 / b_0`) and
:math:`V_0` the prior covariance of the weights in units of the noise variance.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.datasets.validation import as_float_tensor

from bnn.options import positive_number


@dataclass(frozen=True)
class NormalGammaPrior:
    r""":math:`\mathrm{NG}(m_0, V_0, a_0, b_0)`.

    :math:`\tau \sim \mathrm{Gamma}(a_0, b_0)` and :math:`w \mid \tau \sim \mathcal{N}(m_0, V_0/\tau)`.

    Attributes
    ----------
    mean : torch.Tensor
        :math:`m_0`, shape ``(d,)``, float64.
    covariance : torch.Tensor
        :math:`V_0`, shape ``(d, d)``, symmetric positive definite, float64.
    shape, rate : float
        :math:`a_0, b_0 > 0` of the Gamma prior on :math:`\tau` (rate parametrisation).

    Raises
    ------
    ValueError
        When ``mean`` is not a finite vector, ``covariance`` not a symmetric positive-definite
        ``(d, d)`` matrix matching it, or ``shape``, ``rate`` not positive numbers.
    """

    mean: torch.Tensor
    covariance: torch.Tensor
    shape: float = 1.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        mean = as_float_tensor(self.mean, "NormalGammaPrior mean", torch.float64)
        covariance = as_float_tensor(self.covariance, "NormalGammaPrior covariance", torch.float64)
        if mean.dim() != 1:
            raise ValueError(f"NormalGammaPrior mean must be a vector of shape (d,), got shape {tuple(mean.shape)}")
        d = mean.shape[0]
        if covariance.shape != (d, d):
            raise ValueError(f"NormalGammaPrior covariance must have shape ({d}, {d}) to match the mean, "
                             f"got {tuple(covariance.shape)}")
        if not torch.allclose(covariance, covariance.T, rtol=1e-10, atol=0.0):
            raise ValueError("NormalGammaPrior covariance must be symmetric; pass (V + V.T) / 2")
        if torch.linalg.cholesky_ex(covariance).info != 0:
            raise ValueError("NormalGammaPrior covariance must be positive definite (its Cholesky factorisation failed)")
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "covariance", covariance)
        object.__setattr__(self, "shape", positive_number("NormalGammaPrior shape", self.shape))
        object.__setattr__(self, "rate", positive_number("NormalGammaPrior rate", self.rate))

    @classmethod
    def isotropic(cls, num_features: int, scale: float = 1.0, shape: float = 1.0, rate: float = 1.0) -> NormalGammaPrior:
        r""":math:`m_0 = 0`, :math:`V_0 = s^2 I` (:math:`s` = ``scale``): :math:`w \mid \tau \sim \mathcal{N}(0, s^2 I/\tau)`."""
        if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
            raise ValueError(f"num_features must be a positive integer, got {num_features!r}")
        scale = positive_number("NormalGammaPrior scale", scale)
        return cls(torch.zeros(num_features), scale**2 * torch.eye(num_features), shape, rate)

    @property
    def num_features(self) -> int:
        """:math:`d`, the number of weights."""
        return self.mean.shape[0]
