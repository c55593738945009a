"""The checks on a design matrix and targets for the Normal-Gamma regression, run before any work starts."""

from __future__ import annotations

import torch
from bnn.datasets.validation import as_float_tensor
from bnn.inference.cavi.prior import NormalGammaPrior


def check_regression_data(x, y, prior: NormalGammaPrior) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` of shape ``(n, d)`` and ``y`` of shape ``(n,)`` as float64 tensors, checked against ``prior``.

    Raises
    ------
    ValueError
        When ``prior`` is not a :class:`NormalGammaPrior`, the data are not finite numbers, ``x`` is not 2-D,
        ``y`` not 1-D, their lengths differ, or ``x`` has another number of columns than ``prior`` has weights.
    """
    if not isinstance(prior, NormalGammaPrior):
        raise ValueError(f"prior must be a NormalGammaPrior, got {type(prior).__name__}; "
                         "build one with NormalGammaPrior.isotropic(num_features)")
    x = as_float_tensor(x, "design matrix x", torch.float64)
    y = as_float_tensor(y, "targets y", torch.float64)
    if x.dim() != 2:
        raise ValueError(f"design matrix x must be 2-D of shape (n, d), got shape {tuple(x.shape)}; "
                         "use x.reshape(-1, 1) for one feature and add a column of ones for an intercept")
    if y.dim() != 1:
        raise ValueError(f"targets y must have shape (n,), got {tuple(y.shape)}; use y.reshape(-1) for one output")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y differ in length: x has {x.shape[0]} rows, y has {y.shape[0]}")
    if x.shape[1] != prior.num_features:
        raise ValueError(f"x has {x.shape[1]} columns but the prior has {prior.num_features} weights; "
                         f"build the prior with NormalGammaPrior.isotropic({x.shape[1]})")
    return x, y
