"""What a MAP point estimate records: how its optimisation ended, and the log joint it reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.map_search.map_record import MapFitRecord
from bnn.inference.point_estimate.options import MapOptions


@dataclass(kw_only=True)
class MapRecord(MapFitRecord):
    r"""The record of :func:`~bnn.inference.point_estimate.fit_map`.

    Attributes
    ----------
    options : MapOptions
        The options it ran with.
    log_likelihood : float
        :math:`\log p(y \mid x, \hat\theta)` at the estimate (standardised units): what ``"mle"`` maximises.
    log_joint : float
        :math:`\log p(y \mid x, \hat\theta) + \log p(\hat\theta)` (standardised units): what ``"map"`` maximises.
    map_lbfgs_iterations, map_grad_norm, map_converged, noise
        How the MAP fit ended (:class:`~bnn.inference.map_search.map_record.MapFitRecord`).
    """

    options: MapOptions
    log_likelihood: float
    log_joint: float

    def metrics(self) -> dict[str, Any]:
        return {"objective": self.options.objective.value, "map_converged": self.map_converged,
                "map_grad_norm": self.map_grad_norm, "log_likelihood": self.log_likelihood, "log_joint": self.log_joint}
