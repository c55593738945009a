r"""Standardisation with training statistics: :math:`z = (v - \mu) / s`.

A column that is constant on the training split gets :math:`s = 1` (it becomes zero)
instead of a division by zero, as happens with the naval data set. Fit and apply it in float64: in float32 the mean
of values near its largest number (3.4e38) overflows to infinity.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Standardizer:
    """Per-column mean and standard deviation, fitted on training data only."""

    mean: torch.Tensor
    std: torch.Tensor

    @classmethod
    def fit(cls, values: torch.Tensor) -> Standardizer:
        """Statistics of ``values`` along dim 0; constant columns get ``std = 1``."""
        mean = values.mean(dim=0)
        std = values.std(dim=0, unbiased=False) if values.shape[0] > 1 else torch.zeros_like(mean)
        return cls(mean, torch.where(std > 1e-12 * (1 + mean.abs()), std, torch.ones_like(std)))

    @classmethod
    def identity(cls, like: torch.Tensor) -> Standardizer:
        """The do-nothing standardiser for data of ``like``'s column shape."""
        return cls(torch.zeros(like.shape[1:]), torch.ones(like.shape[1:]))

    def to(self, dtype: torch.dtype) -> Standardizer:
        """These statistics in ``dtype``."""
        return Standardizer(self.mean.to(dtype), self.std.to(dtype))

    def transform(self, values: torch.Tensor) -> torch.Tensor:
        return (values - self.mean) / self.std

    def inverse(self, values: torch.Tensor) -> torch.Tensor:
        return values * self.std + self.mean
