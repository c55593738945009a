r"""The 1-D regression toy with a gap between two clusters of inputs.

Inputs come from two clusters, :math:`x \sim U(-1, -0.35) \cup U(0.35, 1)`, targets
from :math:`y = \sin(3x) + 0.3\,x + \varepsilon,\ \varepsilon \sim \mathcal{N}(0, 0.1^2)`.
A good posterior is confident on the clusters and uncertain in the gap and outside
:math:`[-1, 1]` ("in-between" uncertainty, Foong et al. 2019), which is the picture the
method comparison draws.
"""

from __future__ import annotations

import torch
from bnn.datasets.dataset import Dataset

NOISE = 0.1


def toy_function(x: torch.Tensor) -> torch.Tensor:
    """The noise-free regression function."""
    return torch.sin(3 * x) + 0.3 * x


def _cluster_inputs(n: int, generator: torch.Generator) -> torch.Tensor:
    left = torch.rand(n // 2, generator=generator) * 0.65 - 1.0
    right = torch.rand(n - n // 2, generator=generator) * 0.65 + 0.35
    return torch.cat([left, right]).unsqueeze(-1)


def load_toy1d(seed: int = 0, n_train: int = 100, n_test: int = 100) -> Dataset:
    """Draw the toy data with a fixed generator (the same ``seed`` gives the same data)."""
    generator = torch.Generator().manual_seed(seed)
    x_train = _cluster_inputs(n_train, generator)
    x_test = _cluster_inputs(n_test, generator)
    y_train = toy_function(x_train[:, 0]) + NOISE * torch.randn(n_train, generator=generator)
    y_test = toy_function(x_test[:, 0]) + NOISE * torch.randn(n_test, generator=generator)
    return Dataset.from_arrays("toy1d", "regression", x_train, y_train, x_test, y_test)
