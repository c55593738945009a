r"""Whether a stochastic optimisation ended while its objective was still rising: the own convergence check of SVI
(its ELBO) and of the methods that train on minibatches (their negated loss).

Below, the objective is written :math:`\mathcal{L}` (the ELBO for SVI). Its progress in a step is proportional to
the step's learning rate, so the run is cut by its cumulative learning rate
:math:`\tau_t = \sum_{s \le t} \rho(s)` (the schedule's factor :math:`\rho`, :mod:`~bnn.inference.svi.schedules`
for SVI), not by its steps: the later window :math:`b` is the fewest last
steps that hold a tenth of the run's total rate :math:`\tau_T` and at least :data:`MIN_WINDOW` steps,
the earlier window :math:`a` the fewest steps before it that do the same. Under a constant rate these
are the last two tenths of the steps; under the default cosine decay they reach back to about 60% and
49% of the run, since a decayed rate flattens the end of *any* run, however far from its optimum (cut
by steps, a check would pass fits stopped after a small share of their planned steps:
``benchmarks/results/grid_verdicts.md``).

With :math:`\bar{\mathcal{L}}` a window's mean estimate and :math:`s^2` the variance of its estimates
about their least-squares line (the step-to-step noise of one estimate: the residuals are uncorrelated
from one step to the next, being fresh Monte Carlo draws), the gain and its standard
error are

.. math::

    \Delta = \bar{\mathcal{L}}_b - \bar{\mathcal{L}}_a, \qquad
    \mathrm{SE} = \sqrt{s_a^2 / n_a + s_b^2 / n_b}.

The ELBO is still rising when :math:`\Delta > z\,\mathrm{SE}` with :math:`z` = :data:`RISE_Z` (a
one-sided false alarm about 1 time in 740 on a flat trace) *and*
:math:`\Delta > (1 - \bar\rho_b / \bar\rho_a)\, s_b`, with :math:`\bar\rho` a window's mean rate
factor. Under a constant rate a converged fit's ELBO is stationary, and any significant gain is a climb.
Under a decaying rate a converged fit still gains as the smaller steps let its iterates settle closer
to the optimum: drift within the gradient noise, not a climb. That allowance is the noise of one
estimate, scaled by the share by which the rate fell between the windows (0.71 under the default
cosine decay); the settling gain of fits at the defaults on the built-in ``toy1d`` stays within it
(``benchmarks/results/grid_verdicts.md``). A run shorter than
:math:`2` :data:`MIN_WINDOW` steps is not judged.

**Flat, as a share of the run's progress.** A network's training objective on minibatches keeps creeping up for many
epochs by more than one estimate's noise, so a run can be judged instead by the progress it has left:
:attr:`ObjectiveTrend.flat` holds when the gain :math:`\Delta` is at most :data:`FLAT_SHARE` of the run's rise
:math:`R = \bar{\mathcal{L}}_b - \bar{\mathcal{L}}_{\text{start}}` from its first :data:`START_STEPS` steps to its
later window: the fit has made nearly all the progress its run can make. It flags a run too short or too slow
(a rate a hundredth of the default, whose gain, small in nats, stays within the noise the test above allows); the
minibatch MAP and IVON are judged by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WINDOW_FRACTION = 0.1
"""Each window's share of the run's total learning rate."""
MIN_WINDOW = 50
"""The fewest steps a window may hold."""
RISE_Z = 3.0
"""How many standard errors the gain must exceed."""
FLAT_SHARE = 0.03
"""The largest share of the run's rise the later window may add for the run to count as flat: between the largest of
the minibatch MAP's healthy fits and the smallest of its broken fits that its gradient's ratio to the noise does not
flag, near their geometric mean (``benchmarks/results/map_check.md``)."""
START_STEPS = 10
"""The first steps whose mean objective is the run's start, for :attr:`ObjectiveTrend.flat`."""


@dataclass(frozen=True)
class ObjectiveTrend:
    r"""The gain of the objective between the last two windows of a run.

    Attributes
    ----------
    earlier_steps, later_steps : int
        :math:`n_a` and :math:`n_b`, the steps in each window.
    gain : float
        :math:`\Delta`, in nats.
    standard_error : float
        :math:`\mathrm{SE}` of the gain.
    noise : float
        :math:`s_b`, the spread of one estimate about the later window's trend.
    rate_drop : float
        :math:`1 - \bar\rho_b / \bar\rho_a`, the share by which the mean learning rate fell from the earlier
        window to the later (0 under a constant rate).
    rise : float
        :math:`R`, the run's rise from its first :data:`START_STEPS` steps to the later window, in nats.
    """

    earlier_steps: int
    later_steps: int
    gain: float
    standard_error: float
    noise: float
    rate_drop: float
    rise: float

    @property
    def allowance(self) -> float:
        r"""The settling allowance :math:`(1 - \bar\rho_b / \bar\rho_a)\, s_b`, in nats."""
        return self.rate_drop * self.noise

    @property
    def rising(self) -> bool:
        """Whether the gain exceeds :data:`RISE_Z` standard errors and the settling :attr:`allowance`."""
        return self.gain > RISE_Z * self.standard_error and self.gain > self.allowance

    @property
    def flat(self) -> bool:
        """Whether the gain is at most :data:`FLAT_SHARE` of the run's :attr:`rise` (module notes)."""
        return self.gain <= FLAT_SHARE * self.rise

    def shortfall_sentence(self, objective: str, method: str, fix: str) -> str:
        """What the trend says when the run is not :attr:`flat`: ``objective`` had not flattened when ``method``
        stopped, and ``fix``."""
        return (f"{objective} had not flattened when {method} stopped: it rose by {self.gain:.3g} nats over the last "
                f"{self.later_steps} steps (the last tenth of the run's learning rate), more than {FLAT_SHARE:.0%} of its "
                f"rise over the run ({self.rise:.3g} nats); {fix}")

    def sentence(self, objective: str, method: str, fix: str) -> str:
        """What the trend says, for a warning or a report: ``objective`` (``"the ELBO"``) was still rising when
        ``method`` stopped, and ``fix``."""
        z = self.gain / self.standard_error if self.standard_error > 0 else math.inf
        return (f"{objective} was still rising when {method} stopped: its mean over the last {self.later_steps} steps "
                f"(the last tenth of the run's learning rate) is {self.gain:.3g} nats above the {self.earlier_steps} "
                f"steps before ({z:.1f} standard errors, more than the {self.allowance:.3g} nats the falling rate "
                f"alone would give a converged fit); {fix}")


def objective_trend(values: Sequence[float], rates: Sequence[float] | None = None,
                    min_window: int = MIN_WINDOW) -> ObjectiveTrend | None:
    """The :class:`ObjectiveTrend` of the objective's estimates ``values``, one a step, of a run whose steps had the
    learning-rate factors ``rates`` (``None``: a constant rate), each window at least ``min_window`` steps (at least 3,
    for the noise about its line); ``None`` when the run is too short to judge (fewer than ``2 * min_window`` steps)
    or its windows hold a non-finite estimate."""
    values = np.asarray(values, dtype=np.float64)
    share = np.ones(len(values)) if rates is None else np.asarray(rates, dtype=np.float64)
    if len(values) < 2 * min_window:
        return None
    later = _window_start(share, len(values), min_window)
    earlier = None if later is None else _window_start(share, later, min_window)
    if earlier is None:
        return None
    a, b = values[earlier:later], values[later:]
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return None
    noise_a, noise_b = _noise(a), _noise(b)
    rate_drop = max(0.0, 1.0 - float(share[later:].mean() / share[earlier:later].mean()))
    return ObjectiveTrend(len(a), len(b), float(b.mean() - a.mean()),
                          math.sqrt(noise_a**2 / len(a) + noise_b**2 / len(b)), noise_b, rate_drop,
                          float(b.mean() - values[:START_STEPS].mean()))


def _window_start(share: np.ndarray, end: int, min_window: int) -> int | None:
    """The latest start of a window ending before step ``end`` that holds :data:`WINDOW_FRACTION` of the run's total
    rate and ``min_window`` steps; ``None`` when the steps before ``end`` cannot."""
    behind = np.cumsum(share[:end][::-1])  # the rate of the last k + 1 steps before end
    steps = int(np.searchsorted(behind, WINDOW_FRACTION * share.sum())) + 1
    start = end - max(steps, min_window)
    return start if start >= 0 else None


def _noise(window: np.ndarray) -> float:
    """The standard deviation of ``window``'s estimates about their least-squares line."""
    steps = np.arange(len(window), dtype=np.float64)
    residuals = window - np.polyval(np.polyfit(steps, window, 1), steps)
    return float(np.sqrt(residuals @ residuals / (len(window) - 2)))
