"""What a MAP point estimate records: how its optimisation ended, and the log joint it reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bnn.inference.map_estimate import MapFitRecord
from bnn.inference.record import register_record


@register_record
@dataclass(kw_only=True)
class MapRecord(MapFitRecord):
    r"""The record of :func:`~bnn.inference.map.fit_map`.

    Attributes
    ----------
    map_lr, map_tolerance : float
        As the options.
    log_joint : float
        :math:`\log p(y \mid x, \theta_{MAP}) + \log p(\theta_{MAP})` (standardised units).
    map_steps, map_lbfgs_iterations, map_grad_norm, map_converged, noise
        How the MAP fit ended (:class:`~bnn.inference.map_estimate.MapFitRecord`).
    """

    method: ClassVar[str] = "map"
    map_lr: float
    map_tolerance: float
    log_joint: float

    def metrics(self) -> dict[str, Any]:
        return {"map_converged": self.map_converged, "map_grad_norm": self.map_grad_norm, "log_joint": self.log_joint}
