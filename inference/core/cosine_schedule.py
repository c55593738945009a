r"""The cosine decay of a learning rate over a run of :math:`T` steps, the schedule of the methods that train on
minibatches for a fixed number of epochs (IVON, the minibatch MAP fit): the rate at step :math:`t` is the peak rate
times :math:`\tfrac12 (1 + \cos(\pi t / T))`, from the peak down to near zero, so that the last steps settle the
weights where the noise of the first ones left them."""

from __future__ import annotations

import math


def cosine_factors(steps: int) -> list[float]:
    r"""The learning rate's factor at each of ``steps`` steps: :math:`\tfrac12 (1 + \cos(\pi t / T))`."""
    return [0.5 * (1.0 + math.cos(math.pi * step / steps)) for step in range(steps)]
