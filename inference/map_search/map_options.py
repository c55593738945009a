"""The options of a MAP fit, shared by every method that makes one (the MAP method, Laplace, the deep ensemble)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.core.device import DeviceOptions
from bnn.inference.curvature.gauss_newton import GAUSS_NEWTON_MAX_WEIGHTS
from bnn.inference.map_search.map_estimate import MAP_LR, MAP_STEPS, MAP_TOLERANCE
from bnn.inference.map_search.minibatch_map import LR
from bnn.inference.map_search.polish import LBFGS_HISTORY

from bnn.options import option, optional, positive_int, positive_number
from bnn.runtime.memory import parameter_count, value_bytes


@dataclass(frozen=True)
class MapFitOptions(DeviceOptions):
    r"""The MAP fit's options (:func:`~bnn.inference.map_search.map_estimate.find_map`).

    Attributes
    ----------
    map_steps : int
        Adam steps of the MAP fit before its polish.
    map_lr : float
        Adam's rate in the MAP fit.
    map_tolerance : float
        The polish stops once the MAP lies within this many posterior standard deviations of the mode (the Newton
        decrement, :mod:`bnn.inference.curvature.gauss_newton`).
    map_max_iter : int, optional
        Iterations of the polish at most (Levenberg-Marquardt, or L-BFGS where a Gauss-Newton step is too costly:
        :func:`~bnn.inference.curvature.gauss_newton.uses_gauss_newton`); ``None``: 1,000 Levenberg-Marquardt
        steps, or 10,000 L-BFGS iterations where the polish is L-BFGS from the start (1,000 for a network with kinks,
        :meth:`~bnn.models.network.BayesianNetwork.has_kinks`;
        :func:`~bnn.inference.map_search.polish.polish_budget`).
    map_batch_size : int, optional
        Rows per Adam step of the MAP fit: at least the training rows for the full-batch fit and its polish, fewer for
        the fit on minibatches (:mod:`bnn.inference.map_search.minibatch_map`; ``map_epochs`` epochs at most at
        ``map_batch_lr``, no polish); ``None`` (the default): the full batch where that fit is cheap by its counted
        work, else 128 rows.
    map_epochs : int, optional
        The minibatch fit's epochs; ``None`` (the default): 200, or fewer where 32,000 steps come first
        (:func:`~bnn.inference.map_search.minibatch_map.minibatch_epochs`).
    map_batch_lr : float
        Adam's peak rate in the minibatch fit (it falls on a cosine).
    """

    map_steps: int = option(MAP_STEPS, positive_int)
    map_lr: float = option(MAP_LR, positive_number)
    map_tolerance: float = option(MAP_TOLERANCE, positive_number)
    map_max_iter: int | None = option(None, optional(positive_int))
    map_batch_size: int | None = option(None, optional(positive_int))
    map_epochs: int | None = option(None, optional(positive_int))
    map_batch_lr: float = option(LR, positive_number)

    def map_fit_arguments(self) -> dict:
        """The keyword arguments of :func:`~bnn.inference.map_search.map_estimate.find_map` these options set."""
        return {"steps": self.map_steps, "lr": self.map_lr, "tolerance": self.map_tolerance,
                "max_iter": self.map_max_iter, "batch_size": self.map_batch_size, "epochs": self.map_epochs,
                "batch_lr": self.map_batch_lr}

    def map_fit_needs(self, model) -> dict[str, int]:
        r"""The bytes one MAP fit of ``model`` holds at its peak, in float64: its polish, L-BFGS's history of
        :data:`~bnn.inference.map_search.polish.LBFGS_HISTORY` (:math:`H`) step and gradient-change pairs with its
        working vectors, :math:`(2H + 4) D`, or, at most
        :data:`~bnn.inference.curvature.gauss_newton.GAUSS_NEWTON_MAX_WEIGHTS` weights, Levenberg-Marquardt's
        dense Gauss-Newton precision, :math:`D^2`, whichever is larger (Adam's state before it, :math:`4D`, is less
        and is freed when the polish starts)."""
        parameters = parameter_count(model)
        lbfgs = (2 * LBFGS_HISTORY + 4) * parameters
        dense = parameters**2 if parameters <= GAUSS_NEWTON_MAX_WEIGHTS else 0
        what = (f"L-BFGS's history ((2 x {LBFGS_HISTORY} + 4) D)" if lbfgs >= dense
                else "the Gauss-Newton precision (D^2)")
        return {f"the MAP fit's polish: {what}, float64": value_bytes(max(lbfgs, dense), torch.float64)}

    def map_fits_needs(self, model, workers: int, fits: str) -> dict[str, int]:
        """The memory of ``workers`` MAP fits at once (:meth:`map_fit_needs` each), labelled ``"{workers} {fits}
        fitted at once"``."""
        (what, one_fit), = self.map_fit_needs(model).items()
        return {f"{workers} {fits} fitted at once, each {what}": workers * one_fit}
