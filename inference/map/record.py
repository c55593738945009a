"""What a MAP point estimate records: how its optimisation ended, and the log joint it reached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bnn.inference.core.record import register_record
from bnn.inference.posterior_mode.map_record import MapFitRecord


@register_record
@dataclass(kw_only=True)
class MapRecord(MapFitRecord):
    r"""The record of :func:`~bnn.inference.map.fit_map`.

    Attributes
    ----------
    objective : str
        ``"map"`` or ``"mle"``, as the option (:class:`~bnn.inference.map.options.Objective`).
    map_lr, map_tolerance : float
        As the options.
    log_likelihood : float
        :math:`\log p(y \mid x, \hat\theta)` at the estimate (standardised units): what ``"mle"`` maximises.
    log_joint : float
        :math:`\log p(y \mid x, \hat\theta) + \log p(\hat\theta)` (standardised units): what ``"map"`` maximises.
    map_steps, map_lbfgs_iterations, map_grad_norm, map_converged, noise
        How the MAP fit ended (:class:`~bnn.inference.posterior_mode.map_record.MapFitRecord`).
    """

    method: ClassVar[str] = "map"
    objective: str
    map_lr: float
    map_tolerance: float
    log_likelihood: float
    log_joint: float

    def metrics(self) -> dict[str, Any]:
        return {"objective": self.objective, "map_converged": self.map_converged, "map_grad_norm": self.map_grad_norm,
                "log_likelihood": self.log_likelihood, "log_joint": self.log_joint}
