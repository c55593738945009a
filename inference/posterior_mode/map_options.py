"""The options of a MAP fit, shared by every method that makes one (the MAP method, Laplace, the deep ensemble)."""

from __future__ import annotations

from dataclasses import dataclass

from bnn.inference.posterior_mode.map_estimate import MAP_LR, MAP_MAX_ITER, MAP_STEPS, MAP_TOLERANCE

from bnn.options import Options, option, positive_int, positive_number


@dataclass(frozen=True)
class MapFitOptions(Options):
    r"""The MAP fit's options (:func:`~bnn.inference.posterior_mode.map_estimate.find_map`).

    Attributes
    ----------
    map_steps : int
        Adam steps of the MAP fit before its polish.
    map_lr : float
        Adam's rate in the MAP fit.
    map_tolerance : float
        The polish stops once the MAP lies within this many posterior standard deviations of the mode (the Newton
        decrement, :mod:`bnn.inference.posterior_mode.gauss_newton`).
    map_max_iter : int
        Iterations of the polish at most (Levenberg-Marquardt, or L-BFGS where a Gauss-Newton step is too costly:
        :func:`~bnn.inference.posterior_mode.gauss_newton.uses_gauss_newton`).
    """

    map_steps: int = option(MAP_STEPS, positive_int)
    map_lr: float = option(MAP_LR, positive_number)
    map_tolerance: float = option(MAP_TOLERANCE, positive_number)
    map_max_iter: int = option(MAP_MAX_ITER, positive_int)
