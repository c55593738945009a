r"""Whether an SVI run ended while its ELBO was still rising: SVI's own convergence check.

The run's last :math:`2W` ELBO estimates are cut into two windows of :math:`W` steps, the
earlier :math:`a` and the later :math:`b`, with :math:`W` a tenth of the run (at least
:data:`MIN_WINDOW` steps). Their gain and its standard error are

.. math::

    \Delta = \bar{\mathcal{L}}_b - \bar{\mathcal{L}}_a, \qquad
    \mathrm{SE} = \sqrt{s_a^2 / W + s_b^2 / W},

with :math:`s^2` each window's sample variance: the step-to-step spread of the estimates is
mostly their fresh Monte Carlo noise, so the steps are treated as independent. The ELBO is
still rising when :math:`\Delta > z\,\mathrm{SE}` with :math:`z` = :data:`RISE_Z` (a
one-sided false alarm about 1 time in 740 on a flat trace). A run shorter than
:math:`2` :data:`MIN_WINDOW` steps is not judged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW_FRACTION = 0.1
"""Each window's share of the run."""
MIN_WINDOW = 50
"""The fewest steps a window may hold."""
RISE_Z = 3.0
"""How many standard errors the gain must exceed."""


@dataclass(frozen=True)
class ELBOTrend:
    """The gain of the ELBO between the last two windows of a run.

    Attributes
    ----------
    window : int
        :math:`W`, the steps in each window.
    gain : float
        :math:`\\Delta`, in nats.
    standard_error : float
        :math:`\\mathrm{SE}` of the gain.
    """

    window: int
    gain: float
    standard_error: float

    @property
    def rising(self) -> bool:
        """Whether the gain exceeds :data:`RISE_Z` standard errors."""
        return self.gain > RISE_Z * self.standard_error

    def sentence(self) -> str:
        """What the trend says, for a warning or a report."""
        z = self.gain / self.standard_error if self.standard_error > 0 else math.inf
        return (f"the ELBO was still rising when SVI stopped: its mean over the last {self.window} steps is "
                f"{self.gain:.3g} nats above the {self.window} steps before ({z:.1f} "
                "standard errors); give it more steps (steps=, --steps)")


def elbo_trend(elbo: Sequence[float]) -> ELBOTrend | None:
    """The :class:`ELBOTrend` of the ELBO estimates ``elbo`` of a run, ``None`` when the run is too short to judge
    (fewer than ``2 * MIN_WINDOW`` steps) or holds a non-finite estimate."""
    window = max(MIN_WINDOW, int(WINDOW_FRACTION * len(elbo)))
    if len(elbo) < 2 * window or not all(math.isfinite(value) for value in elbo[-2 * window:]):
        return None
    earlier, later = elbo[-2 * window:-window], elbo[-window:]
    gain = statistics.fmean(later) - statistics.fmean(earlier)
    standard_error = math.sqrt((statistics.variance(earlier) + statistics.variance(later)) / window)
    return ELBOTrend(window, gain, standard_error)
