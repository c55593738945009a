r"""What a fit will cost, said before it is spent: the units of work it needs times the measured time of one.

Each method states its cost (:class:`~bnn.inference.core.cost_model.CostModel`, in its package's ``cost.py``): how
many units (value-and-gradient evaluations of the log joint, of NUTS's potential, whole SVI steps, or a MAP fit's
Adam steps and polish iterations) a fit of its options needs, and how one unit is timed on the model and data at hand
(a few of them as the fit takes them, after an untimed one; on one minibatch for the methods that step on
minibatches). Units that several methods share (the log joint's gradient, a MAP fit's Adam step) are measured once.
Free cores are the cores less those other work keeps busy now (:func:`~bnn.runtime.workers.free_cores`). Each estimate
says which figure it is (expected, with the worst case beside it, or a floor).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from bnn.inference.core.cost_model import GradientCount
from bnn.inference.fit import METHODS

from bnn.options import Options
from bnn.runtime.workers import fit_threads


@dataclass(frozen=True)
class CostEstimate:
    """The cost of one fit.

    Attributes
    ----------
    method : str
        The method.
    gradients : int
        Units of work the fit needs (per process when ``parallel`` > 1).
    seconds_per_gradient : float
        The measured time of one unit, on the data the method steps on (an SVI step: the whole step).
    parallel : int
        Processes sharing the work (chains or members run side by side).
    bound : str
        ``"expected"`` (the MAP-centred fits, with their worst case beside it), ``"floor"`` (a lower bound),
        ``"measured steps"``, or NUTS's ``"every tree at full depth"`` (the most gradients; the sampler's work between
        them comes on top).
    how : str
        The count spelled out, for the user.
    unit : str
        What is counted: ``"gradients"`` or ``"steps"``.
    polish : int
        Expected MAP polish iterations, each taking ``seconds_per_polish``.
    polish_at_most : int
        The most polish iterations (the worst case).
    seconds_per_polish : float
        The measured time of one polish iteration.
    """

    method: str
    gradients: int
    seconds_per_gradient: float
    parallel: int
    bound: str
    how: str
    unit: str = "gradients"
    polish: int = 0
    polish_at_most: int = 0
    seconds_per_polish: float = 0.0

    def _wall_seconds(self, polish: int) -> float:
        return (self.gradients * self.seconds_per_gradient + polish * self.seconds_per_polish) / self.parallel

    @property
    def seconds(self) -> float:
        """Estimated wall time: gradients times the time of one, plus the polish iterations times the time of one,
        shared by the parallel processes."""
        return self._wall_seconds(self.polish)

    @property
    def most_seconds(self) -> float:
        """The wall time with every polish at its budget (:attr:`seconds` for a count without polish iterations)."""
        return self._wall_seconds(self.polish_at_most)

    def describe(self) -> str:
        """One line: the method, the estimated time and how it was counted."""
        at_most = f"; at most {format_seconds(self.most_seconds)}" if self.polish_at_most > self.polish else ""
        polish = (f" + {self.polish:,} polish iterations x {self.seconds_per_polish * 1e6:.0f} us" if self.polish else "")
        return (f"{self.method}: about {format_seconds(self.seconds)} ({self.bound}{at_most}): {self.how} = "
                f"{self.gradients:,} {self.unit} x {self.seconds_per_gradient * 1e6:.0f} us{polish}"
                + (f" / {self.parallel} processes" if self.parallel > 1 else ""))


def format_seconds(seconds: float) -> str:
    """``42 s``, ``12.5 min`` or ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def gradient_count(method: str, options: Options, n: int, model=None) -> GradientCount | None:
    """The :class:`~bnn.inference.core.cost_model.GradientCount` of ``method`` under ``options`` on ``n`` examples,
    or ``None`` for a method without a cost model; ``model`` tells whether the MAP fits choose a learned noise by the
    evidence."""
    cost = METHODS.get(method).cost
    return None if cost is None else cost.count(options, n, model)


def estimate_cost(method: str, options: Options, model, x: torch.Tensor, y: torch.Tensor,
                  timings: dict[tuple[str, int], float] | None = None) -> CostEstimate | None:
    """The :class:`CostEstimate` of fitting ``model`` to ``(x, y)`` with ``method`` under the parsed ``options``;
    ``None`` for a method without a cost model. ``timings`` caches the measured units by kind and rows."""
    cost = METHODS.get(method).cost
    if cost is None:
        return None
    count = cost.count(options, x.shape[0], model)
    rows = cost.rows(options, x.shape[0], model)
    timings = {} if timings is None else timings

    def timed(key: str, unit_seconds) -> float:
        if (key, rows) not in timings:
            with fit_threads():  # the torch threads the fit itself will run on
                timings[key, rows] = unit_seconds(model, x[:rows], y[:rows], options)
        return timings[key, rows]

    polish_seconds = timed("map polish", cost.polish_seconds) if count.polish_at_most else 0.0
    return CostEstimate(method, count.gradients, timed(cost.unit_key, cost.unit_seconds), count.parallel, count.bound,
                        count.how, cost.unit, count.polish, count.polish_at_most, polish_seconds)
