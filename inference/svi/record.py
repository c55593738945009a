"""What an SVI fit records: its trajectory options, the ELBO of every step, and why it stopped early if it did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.objective_trend import ObjectiveTrend, objective_trend
from bnn.inference.core.record import FitRecord
from bnn.inference.core.temperature import tempered_label
from bnn.inference.svi.options import SVIOptions

ELBO_RISING = ("the ELBO", "SVI", "give it more steps (steps=, --steps)")
"""What SVI's trend says when its ELBO was still rising: the objective, the method and the fix."""


@dataclass(kw_only=True)
class SVIRecord(FitRecord):
    r"""The record of :func:`~bnn.inference.svi.fit_svi`.

    Attributes
    ----------
    options : SVIOptions
        The options it ran with.
    first_step_seconds : float
        Wall time of the first step (it compiles a JIT loss).
    steps : int
        The steps done (fewer than planned when the fit stopped early).
    batch_size : int
        The minibatch size in force (all the data when ``options.batch_size`` is ``None``).
    kl_warmup_steps : int, optional
        With ``kl_weighting="warmup"``, the steps over which the KL weight rose to 1.
    resumed_from_step : int, optional
        The checkpoint step a resumed fit continued from.
    elbo : list of float
        The ELBO estimate of every step (with a non-uniform KL weighting, the weighted objective).
    final_elbo : float
        The mean ELBO over the last 50 steps, :math:`\mathcal{L} \le \log p(\mathcal{D})`.
    stopped : str, optional
        Why the fit stopped before its last step (a non-finite ELBO).
    """

    options: SVIOptions
    first_step_seconds: float
    steps: int
    batch_size: int
    kl_warmup_steps: int | None = None
    resumed_from_step: int | None = None
    final_elbo: float
    elbo: list[float]
    stopped: str | None = None

    @property
    def label(self) -> str:
        """``svi (<guide>)``: the guide makes the fit (and ``(T=...)`` its temperature where it is not 1)."""
        return tempered_label(f"svi ({self.guide})", self.temperature)

    @property
    def trend(self) -> ObjectiveTrend | None:
        """The ELBO's trend at the end of the run (:mod:`~bnn.inference.core.objective_trend`), its windows cut by the
        learning rate of the options' schedule over the recorded steps; ``None`` for a run too short to judge."""
        total = len(self.elbo)
        rates = [self.options.lr_schedule.factor(step, total, self.options.final_lr_fraction) for step in range(total)]
        return objective_trend(self.elbo, rates)

    @property
    def converged(self) -> bool | None:
        """SVI's own check: ``False`` when the ELBO was still rising at the end (:attr:`trend`), ``None`` for a run
        too short to judge or stopped early."""
        trend = self.trend
        return None if trend is None or self.stopped is not None else not trend.rising

    def problems(self) -> list[str]:
        trend = self.trend
        rising = [trend.sentence(*ELBO_RISING)] if trend is not None and trend.rising and self.stopped is None else []
        return rising + ([] if self.stopped is None else [f"SVI stopped early: {self.stopped}"])

    def metrics(self) -> dict[str, Any]:
        return {"final_elbo": self.final_elbo, **({} if self.stopped is None else {"stopped": self.stopped})}
