r"""Learning-rate schedules for SVI: the factor :math:`\rho(t)` multiplying the base rate at step :math:`t` of :math:`T`."""

from __future__ import annotations

import math
from enum import Enum


class LRSchedule(str, Enum):
    """How the learning rate moves from ``lr`` to ``lr * final_lr_fraction`` over the run."""

    CONSTANT = "constant"
    """:math:`\\rho(t) = 1`."""
    EXPONENTIAL = "exponential"
    """:math:`\\rho(t) = r^{t/T}` with :math:`r` = ``final_lr_fraction``."""
    COSINE = "cosine"
    """:math:`\\rho(t) = r + (1-r)\\,\\tfrac{1}{2}(1 + \\cos(\\pi t/T))`."""

    def factor(self, step: int, total: int, final_fraction: float) -> float:
        """The multiplier :math:`\\rho(t)` at ``step`` of ``total``."""
        progress = step / max(total, 1)
        if self is LRSchedule.CONSTANT:
            return 1.0
        if self is LRSchedule.EXPONENTIAL:
            return final_fraction**progress
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))
