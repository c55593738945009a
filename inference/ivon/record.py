"""What an IVON fit records: its training objective step by step, the steps done, the noise, and its own check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.inference.core.objective_trend import ObjectiveTrend, objective_trend
from bnn.inference.core.record import FitRecord
from bnn.inference.ivon.options import IVONOptions

OBJECTIVE_NOT_FLAT = ("IVON's training objective", "IVON", "give it more epochs (epochs=, --epochs)")
"""What IVON's trend says when its objective had not flattened: the objective, the method and the fix."""


@dataclass(kw_only=True)
class IVONRecord(FitRecord):
    """The record of :func:`~bnn.inference.ivon.fit_ivon`.

    Attributes
    ----------
    options : IVONOptions
        The options it ran with.
    batch_size : int
        Examples per step.
    steps_done : int
        The steps taken.
    objective : list of float
        The training objective of every step: the mean log-likelihood of its minibatch at its draw.
    noise : float, optional
        The noise scale a learned Gaussian noise was fitted to.
    """

    options: IVONOptions
    batch_size: int
    steps_done: int
    objective: list[float]
    noise: float | None = None

    @property
    def trend(self) -> ObjectiveTrend | None:
        """The objective's trend at the end of the run (:mod:`~bnn.inference.core.objective_trend`), its windows cut
        by the cosine rate; ``None`` for a run too short to judge."""
        return objective_trend(self.objective, cosine_factors(len(self.objective)))

    @property
    def converged(self) -> bool | None:
        """IVON's own check: ``False`` when its objective had not flattened at the end (its last gain more than
        :data:`~bnn.inference.core.objective_trend.FLAT_SHARE` of its rise over the run), ``None`` for a run too short
        to judge."""
        trend = self.trend
        return None if trend is None else trend.flat

    def problems(self) -> list[str]:
        trend = self.trend
        return [trend.shortfall_sentence(*OBJECTIVE_NOT_FLAT)] if trend is not None and not trend.flat else []

    def metrics(self) -> dict[str, Any]:
        return {"final_objective": self.objective[-1], **({} if self.noise is None else {"noise": self.noise})}
