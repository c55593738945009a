"""The options of a MAP point estimate, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch
from bnn.inference.posterior_mode.map_estimate import MAP_MAX_ITER, MAP_TOLERANCE

from bnn.options import Options, choice, flag, option, positive_int, positive_number, seed
from bnn.runtime.memory import parameter_count, value_bytes


class Objective(str, Enum):
    r"""What the point estimate maximises over the weights :math:`\theta`."""

    MAP = "map"
    r""":math:`\log p(y \mid x, \theta) + \log p(\theta)`: the posterior mode (weight decay under a Gaussian prior,
    ridge regression for a linear network)."""
    MLE = "mle"
    r""":math:`\log p(y \mid x, \theta)` alone: maximum likelihood, the classical unregularised network (least squares
    for a linear network with Gaussian noise); the prior only draws the starting weights."""


@dataclass(frozen=True)
class MapOptions(Options):
    r"""Options of :func:`~bnn.inference.map.fit_map`.

    Attributes
    ----------
    objective : {"map", "mle"}
        See :class:`Objective`: the log joint (default) or the log-likelihood alone.
    map_steps, map_lr : int, float
        Adam steps and rate before the polish (Laplace's defaults).
    map_tolerance : float
        The polish stops once the estimate lies within this many standard deviations of the optimum (the Newton
        decrement, :mod:`bnn.inference.posterior_mode.gauss_newton`; under ``objective="mle"`` the curvature is the likelihood's
        alone).
    map_max_iter : int
        Iterations of the polish at most (Levenberg-Marquardt, or L-BFGS where a Gauss-Newton step is too
        costly: :func:`~bnn.inference.posterior_mode.gauss_newton.uses_gauss_newton`).
    seed : int
        Seeds the start, a draw of the prior: the same seed gives the same estimate.
    progress : bool
        Show a tqdm bar over the Adam steps.
    """

    objective: Objective = option("map", choice(Objective))
    map_steps: int = option(1000, positive_int)
    map_lr: float = option(0.01, positive_number)
    map_tolerance: float = option(MAP_TOLERANCE, positive_number)
    map_max_iter: int = option(MAP_MAX_ITER, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        return {"the MAP fit: Adam's state (4 D, float64)": value_bytes(4 * parameter_count(model), torch.float64)}
