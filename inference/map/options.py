"""The options of a MAP point estimate, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.map_estimate import MAP_MAX_ITER, MAP_TOLERANCE
from bnn.inference.memory import parameter_count, value_bytes

from bnn.options import Options, flag, option, positive_int, positive_number, seed


@dataclass(frozen=True)
class MapOptions(Options):
    r"""Options of :func:`~bnn.inference.map.fit_map`.

    Attributes
    ----------
    map_steps, map_lr : int, float
        Adam steps and rate before the polish (Laplace's defaults).
    map_tolerance : float
        The polish stops once the MAP lies within this many posterior standard deviations of the mode (the
        Newton decrement, :mod:`bnn.inference.gauss_newton`).
    map_max_iter : int
        Iterations of the polish at most (Levenberg-Marquardt, or L-BFGS where a Gauss-Newton step is too
        costly: :func:`~bnn.inference.gauss_newton.uses_gauss_newton`).
    seed : int
        Seeds the start, a draw of the prior: the same seed gives the same estimate.
    progress : bool
        Show a tqdm bar over the Adam steps.
    """

    map_steps: int = option(1000, positive_int)
    map_lr: float = option(0.01, positive_number)
    map_tolerance: float = option(MAP_TOLERANCE, positive_number)
    map_max_iter: int = option(MAP_MAX_ITER, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        return {"the MAP fit: Adam's state (4 D, float64)": value_bytes(4 * parameter_count(model), torch.float64)}
