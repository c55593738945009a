"""The options of a MAP point estimate, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bnn.inference.map_search.map_options import MapFitOptions

from bnn.options import choice, flag, option, seed


class Objective(str, Enum):
    r"""What the point estimate maximises over the weights :math:`\theta`."""

    MAP = "map"
    r""":math:`\log p(y \mid x, \theta) + \log p(\theta)`: the posterior mode (weight decay under a Gaussian prior,
    ridge regression for a linear network)."""
    MLE = "mle"
    r""":math:`\log p(y \mid x, \theta)` alone: maximum likelihood, the classical unregularised network (least squares
    for a linear network with Gaussian noise); the prior only draws the starting weights."""


@dataclass(frozen=True)
class MapOptions(MapFitOptions):
    r"""Options of :func:`~bnn.inference.point_estimate.fit_map`: the MAP fit's
    (:class:`~bnn.inference.map_search.map_options.MapFitOptions`) and

    Attributes
    ----------
    objective : {"map", "mle"}
        See :class:`Objective`: the log joint (default) or the log-likelihood alone (then the polish's curvature,
        and its ``map_tolerance``, are the likelihood's alone).
    seed : int
        Seeds the start, a draw of the prior: the same seed gives the same estimate.
    progress : bool
        Show a tqdm bar over the Adam steps.
    """

    objective: Objective = option("map", choice(Objective))
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        return self.map_fit_needs(model)
