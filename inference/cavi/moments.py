r"""The moments shared by the exact posterior and the CAVI fit: the weights' variances and :math:`\tau`'s Gamma."""

from __future__ import annotations

import torch


class WeightsAndPrecision:
    r"""A distribution over :math:`(w, \tau)` whose :math:`\tau` marginal is :math:`\mathrm{Gamma}(a, b)`.

    Subclasses provide ``weight_covariance`` ``(d, d)``, ``tau_shape`` :math:`a` and ``tau_rate`` :math:`b`.
    """

    weight_covariance: torch.Tensor
    tau_shape: float
    tau_rate: float

    @property
    def weight_variance(self) -> torch.Tensor:
        r""":math:`\operatorname{Var}[w_k]`, the diagonal of ``weight_covariance``."""
        return torch.diagonal(self.weight_covariance)

    @property
    def tau_mean(self) -> float:
        r""":math:`\mathbb{E}[\tau] = a / b`."""
        return self.tau_shape / self.tau_rate

    @property
    def tau_variance(self) -> float:
        r""":math:`\operatorname{Var}[\tau] = a / b^2`."""
        return self.tau_shape / self.tau_rate**2
