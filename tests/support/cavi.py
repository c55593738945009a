"""A small Normal-Gamma regression problem shared by the CAVI tests."""

from __future__ import annotations

import torch
from bnn.inference.cavi import NormalGammaPrior


def regression_problem(num_data: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, NormalGammaPrior]:
    """``(x, y, prior)``: two features and an intercept column, noise sd 0.5, a Normal-Gamma prior with a nonzero mean."""
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(num_data, 2, generator=generator, dtype=torch.float64)
    x = torch.cat([features, torch.ones(num_data, 1, dtype=torch.float64)], dim=1)
    noise = 0.5 * torch.randn(num_data, generator=generator, dtype=torch.float64)
    y = x @ torch.tensor([0.8, -0.5, 0.3], dtype=torch.float64) + noise
    covariance = torch.tensor([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 4.0]], dtype=torch.float64)
    prior = NormalGammaPrior(torch.tensor([0.1, 0.0, -0.2]), covariance, shape=2.0, rate=1.5)
    return x, y, prior
