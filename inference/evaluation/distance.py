r"""How far an input lies from the training data: the axis along which a posterior's uncertainty should grow.

.. math::

    d(x) = \min_i \lVert x - x_i \rVert_2

over the training inputs :math:`x_i`. A point estimate's predictive spread is the same at every :math:`d`; an honest
posterior's grows with it (in the gap between clusters and outside the data).
"""

from __future__ import annotations

import torch


def nearest_training_distance(x: torch.Tensor, x_train: torch.Tensor) -> torch.Tensor:
    """The Euclidean distance of each row of ``x`` ``(n, d)`` to its nearest row of ``x_train`` ``(m, d)``, shape ``(n,)``.

    Raises
    ------
    ValueError
        When the inputs are not two-dimensional with the same number of columns, or ``x_train`` is empty.
    """
    if x.dim() != 2 or x_train.dim() != 2 or x.shape[1] != x_train.shape[1]:
        raise ValueError(f"x and x_train must be (n, d) and (m, d) with the same d, got {tuple(x.shape)} and "
                         f"{tuple(x_train.shape)}")
    if len(x_train) == 0:
        raise ValueError("x_train is empty: there is no nearest training input")
    return torch.cdist(x.to(torch.float64), x_train.to(torch.float64)).min(dim=1).values.to(x.dtype)
