r"""How a method says what a fit will cost before it runs: the units of work it needs (gradients or steps),
counted from its options, times the measured time of one unit on the model and data at hand.

Each method's package states its :class:`CostModel` (``cost.py``) and its :class:`~bnn.inference.core.method.Method`
carries it; :mod:`bnn.inference.evaluation.cost` measures the units and says the estimates.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bnn.options import Options


@dataclass(frozen=True)
class GradientCount:
    """The work one fit needs.

    Attributes
    ----------
    gradients : int
        Units of work (value-and-gradient evaluations, or whole steps), per process when ``parallel`` > 1.
    parallel : int
        Processes sharing the work (chains or members side by side).
    bound : str
        ``"expected"`` (the MAP-centred fits), ``"floor"`` (a lower bound), ``"measured steps"``, or NUTS's ``"every
        tree at full depth"``.
    how : str
        The count spelled out, for the user.
    polish : int
        Expected iterations of a MAP polish, a second unit of work timed apart (:attr:`CostModel.polish_seconds`).
    polish_at_most : int
        The most polish iterations the fit may take (its worst case).
    """

    gradients: int
    parallel: int
    bound: str
    how: str
    polish: int = 0
    polish_at_most: int = 0


NUM_SAMPLES = operator.attrgetter("num_samples")
"""The draws most methods' posteriors hold: their options' ``num_samples``."""


@dataclass(frozen=True)
class CostModel:
    """A method's cost: its count and the unit it is timed in.

    Attributes
    ----------
    count : callable
        ``count(options, rows, model) -> GradientCount`` for parsed ``options`` on ``rows`` training examples.
    unit_seconds : callable
        ``unit_seconds(model, x, y, options) -> float``: the measured wall time of one unit on ``(x, y)``.
    unit_key : str
        Methods timing the same unit (``"log joint"``) share one measurement.
    minibatch : bool
        The unit is timed on one minibatch (``options.batch_size`` rows, all of them when it is ``None``), not on the
        full data.
    batch_rows : callable, optional
        ``batch_rows(model, rows, options) -> int``: the minibatch's rows where the method chooses them for the
        network when ``options.batch_size`` is ``None`` (SVI's regime); ``None``: the option's.
    unit : str
        What ``count`` counts, for messages: ``"gradients"`` or ``"steps"``.
    polish_seconds : callable, optional
        ``polish_seconds(model, x, y, options) -> float``: the measured wall time of one polish iteration, for the
        methods whose count has polish iterations (the MAP-centred fits).
    draws : callable
        ``draws(options) -> int``: the draws the fit's posterior will hold (all chains or members together), which
        the report evaluates at every row (:mod:`bnn.experiments.comparison.report_cost`); by default
        ``options.num_samples``.
    """

    count: Callable[[Options, int, Any], GradientCount]
    unit_seconds: Callable[[Any, torch.Tensor, torch.Tensor, Options], float]
    unit_key: str
    minibatch: bool = False
    unit: str = "gradients"
    polish_seconds: Callable[[Any, torch.Tensor, torch.Tensor, Options], float] | None = None
    draws: Callable[[Any], int] = NUM_SAMPLES
    batch_rows: Callable[[Any, int, Options], int] | None = None

    def rows(self, options: Options, n: int, model=None) -> int:
        """The rows one unit of a fit of ``model`` is timed on: ``n``, or one minibatch of them."""
        if not self.minibatch:
            return n
        batch_size = (self.batch_rows(model, n, options) if self.batch_rows is not None
                      else getattr(options, "batch_size", None))
        return n if batch_size is None else min(batch_size, n)
