r"""What an MC dropout fit records: its training (loss history, steps done), the dropout rate and the noise, and its
own check.

**The check.** Dropout keeps the training objective noisy, and under Adam's constant rate it creeps up for long after
the network has settled, so neither a test of the gain against its noise alone (it flags healthy fits on MNIST-1D run
twice the default length) nor the gain's share of the run's rise (it passed 17 of 18 broken fits: a start from a
prior draw makes the rise large) tells a finished fit from an unfinished one. The objective
:math:`\mathcal{L} = -` ``loss_history`` is still gaining when its mean over the last tenth of the steps exceeds the
tenth before by more than :data:`GAIN_LIMIT` nats per example *and* by more than
:data:`~bnn.inference.core.objective_trend.RISE_Z` standard errors (:mod:`~bnn.inference.core.objective_trend`):
chosen on the built-in data, where healthy fits (the defaults, twice the default length) gain at most 0.017 nats and
22 of 24 broken ones (a tenth of the length, a hundredth of the rate) more (``benchmarks/results/map_check.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bnn.inference.core.objective_trend import ObjectiveTrend, objective_trend
from bnn.inference.core.record import FitRecord
from bnn.inference.mc_dropout.options import MCDropoutOptions

GAIN_LIMIT = 0.02
"""The most, in nats per example, the objective may gain from the second-last tenth of a run to its last for the run
to count as finished (module notes)."""


def training_trend(loss_history: Sequence[float]) -> ObjectiveTrend | None:
    """The trend of the objective (the negated loss) at the end of a run at a constant rate; ``None`` for a run too
    short to judge."""
    return objective_trend([-loss for loss in loss_history])


def still_gaining(trend: ObjectiveTrend | None) -> bool:
    """Whether ``trend`` gains more than :data:`GAIN_LIMIT` and more than its noise allows (module notes)."""
    return trend is not None and trend.rising and trend.gain > GAIN_LIMIT


@dataclass(kw_only=True)
class MCDropoutRecord(FitRecord):
    """The record of :func:`~bnn.inference.mc_dropout.fit_mc_dropout`.

    Attributes
    ----------
    options : MCDropoutOptions
        The options it ran with.
    batch_size : int
        Examples per step (the training set's size for full-batch steps).
    steps_done : int
        The steps taken: ``options.training_steps(rows)``, times up to
        :data:`~bnn.inference.mc_dropout.options.MAX_LENGTHS` at the default length, unless interrupted.
    loss_history : list of float
        The objective of every step: the negative expected log joint per example (see
        :mod:`bnn.inference.mc_dropout.fit`), up to a constant.
    noise : float, optional
        The noise scale a learned Gaussian noise was fitted to.
    incomplete : bool
        Training was interrupted (Ctrl-C, SIGTERM) before its last step; ``incomplete_reason`` says when.
    """

    options: MCDropoutOptions
    batch_size: int
    steps_done: int
    loss_history: list[float]
    noise: float | None = None
    incomplete: bool = False
    incomplete_reason: str | None = None

    @property
    def trend(self) -> ObjectiveTrend | None:
        """The training objective's trend at the end of the run (module notes); ``None`` for a run too short to
        judge."""
        return training_trend(self.loss_history)

    @property
    def converged(self) -> bool | None:
        """MC dropout's own check: ``False`` when the objective was still gaining at the end (module notes), ``None``
        for a run too short to judge."""
        trend = self.trend
        return None if trend is None else not still_gaining(trend)

    def problems(self) -> list[str]:
        problems = [f"MC dropout was interrupted: {self.incomplete_reason}"] if self.incomplete else []
        trend = self.trend
        if still_gaining(trend):
            problems.append(
                f"MC dropout's training objective was still rising when it stopped: its mean over the last "
                f"{trend.later_steps} steps is {trend.gain:.3g} nats per example above the {trend.earlier_steps} steps "
                f"before ({trend.gain / trend.standard_error:.1f} standard errors; a finished fit gains at most "
                f"{GAIN_LIMIT} nats); give it more epochs (epochs=, --epochs), or leave steps and epochs unset to train "
                "on while it gains")
        return problems

    def metrics(self) -> dict[str, Any]:
        faults = {"incomplete": True, "incomplete_reason": self.incomplete_reason} if self.incomplete else {}
        return {"final_loss": self.loss_history[-1], "dropout_rate": self.options.dropout_rate,
                **({} if self.noise is None else {"noise": self.noise}), **faults}
