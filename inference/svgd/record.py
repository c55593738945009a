r"""What an SVGD fit records: its particles' mean log joint step by step, their dimension, the steps done, the noise,
and its own check.

**The check.** The objective, the particles' mean log joint :math:`\bar\ell`, is deterministic (full-batch steps), so
the trend of :mod:`bnn.inference.core.objective_trend` finds any rise, however small, significant against its
step-to-step noise: SVGD's particles keep creeping for thousands of steps. What matters is whether the rise is larger
than the particles could resolve: :math:`n` exact draws of a posterior of :math:`D` coordinates, near Gaussian, estimate
its expected log joint with a standard error of :math:`\sqrt{D/2}/\sqrt{n}` (the log density of a Gaussian is
:math:`-\chi^2_D/2` plus a constant, of standard deviation :math:`\sqrt{D/2}`). The fit is still rising when the gain
between the last two windows of a tenth of the run's learning rate each is significant by that trend *and* above
:data:`~bnn.inference.core.objective_trend.RISE_Z` such errors: the particles were still moving by more than the
posterior's own spread lets :math:`n` draws tell apart. The windows hold at least :data:`MIN_WINDOW` steps, so that a
run a hundred times too short is judged too. The scale is fixed by :math:`D` and :math:`n`, not read from the particles,
whose log joints spread far wider while they are still far from the posterior.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.inference.core.objective_trend import RISE_Z, ObjectiveTrend, objective_trend
from bnn.inference.core.record import FitRecord
from bnn.inference.svgd.options import SVGDOptions

MIN_WINDOW = 5
"""The fewest steps in each of the trend's windows (the shared default is 50, for noisy minibatch objectives)."""


@dataclass(kw_only=True)
class SVGDRecord(FitRecord):
    """The record of :func:`~bnn.inference.svgd.fit_svgd`.

    Attributes
    ----------
    options : SVGDOptions
        The options it ran with.
    steps_done : int
        The steps taken.
    objective : list of float
        The particles' mean log joint at every step, in Pyro's unconstrained coordinates
        (:mod:`bnn.inference.svgd.fit`).
    dimension : int
        :math:`D`, the particles' coordinates.
    noise : float, optional
        The particles' mean noise scale, for a learned Gaussian noise.
    """

    options: SVGDOptions
    steps_done: int
    objective: list[float]
    dimension: int
    noise: float | None = None

    @property
    def trend(self) -> ObjectiveTrend | None:
        """The objective's trend at the end of the run, its windows cut by the cosine rate; ``None`` for a run too
        short to judge (under ``2 * MIN_WINDOW`` steps)."""
        return objective_trend(self.objective, cosine_factors(len(self.objective)), MIN_WINDOW)

    @property
    def resolution(self) -> float:
        r"""The smallest rise the particles resolve: ``RISE_Z`` standard errors :math:`\sqrt{D/2}/\sqrt{n}` (module
        notes)."""
        return RISE_Z * math.sqrt(self.dimension / 2 / self.options.num_samples)

    @property
    def converged(self) -> bool | None:
        """SVGD's own check: ``False`` when its objective was still rising at the end (module notes), ``None`` for a
        run too short to judge."""
        trend = self.trend
        return None if trend is None else not (trend.rising and trend.gain > self.resolution)

    def problems(self) -> list[str]:
        if self.converged is not False:
            return []
        fix = (f"and above the {self.resolution:.3g} nats ({RISE_Z:g} standard errors of the mean log joint of "
               f"{self.options.num_samples} draws of a posterior of {self.dimension} coordinates) the particles "
               "resolve; give it more steps (steps=, --steps) or a higher lr")
        return [self.trend.sentence("the particles' mean log joint", "SVGD", fix)]

    def metrics(self) -> dict[str, Any]:
        return {"final_objective": self.objective[-1], **({} if self.noise is None else {"noise": self.noise})}
