r"""Convergence of MCMC chains in function space: the R-hat of the network's output.

The weights of a network are not identifiable: permuting the hidden units of a layer (and
flipping the signs of an odd activation's units) gives the same function, so chains that
settle in different permutations disagree on every weight (split :math:`\hat{R} \gg 1.01`)
while they agree on everything the model predicts. The check that matters is the R-hat of
the predictive mean :math:`f(x_i; W)` over the chains,

.. math::

    \hat{R}_{\text{pred}} = \max_i \hat{R}\big(\{f(x_i; W_{c,d})\}_{c,d}\big),

ArviZ's rank-normalised split :math:`\hat{R}` of each output at each input :math:`x_i`, the
maximum over inputs and outputs (at most ``MAX_POINTS`` inputs, evenly spaced, so that the
cost stays bounded on large data sets).
"""

from __future__ import annotations

from collections.abc import Mapping

import arviz as az
import numpy as np
import torch

MAX_POINTS = 500


def r_hat_over_points(f: np.ndarray) -> float:
    r"""The largest :math:`\hat{R}` over the trailing axes of ``f``, of shape ``(chains, draws, *points)`` (chains >= 2);
    NaN when some point's draws are constant."""
    if f.ndim < 2 or f.shape[0] < 2:
        raise ValueError(f"R-hat needs draws of shape (chains >= 2, draws, ...), got {f.shape}; run two or more chains")
    with np.errstate(invalid="ignore", divide="ignore"):
        r_hat = az.rhat(az.convert_to_dataset({"f": f.reshape(*f.shape[:2], -1)}))["f"].values
    return float(np.max(r_hat))  # a NaN propagates


def predictive_r_hat(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor) -> float:
    r""":math:`\hat{R}_{\text{pred}}` of ``model`` at the inputs ``x`` (``(n, in_features)``; at most ``MAX_POINTS``
    of them, evenly spaced, are used), for draws ``samples[site]`` of shape ``(chains, draws, *site_shape)``."""
    chains, draws = next(iter(samples.values())).shape[:2]
    index = torch.linspace(0, x.shape[0] - 1, min(x.shape[0], MAX_POINTS)).round().long()
    values = {name: torch.as_tensor(value).reshape(chains * draws, *value.shape[2:]) for name, value in samples.items()}
    with torch.no_grad():
        f = model.forward(x[index], values)  # (chains * draws, points, out)
    return r_hat_over_points(f.reshape(chains, draws, -1).numpy())
