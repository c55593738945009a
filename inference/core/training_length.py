r"""The default length of a minibatch training (IVON, MC dropout): whole passes over the data, enough of them and
enough steps.

With :math:`N` training rows in batches of :math:`B`, an epoch is :math:`M = \lceil N / B \rceil` steps, and the
default training is the fewest epochs :math:`E` with :math:`E \ge` :data:`MIN_EPOCHS` and :math:`E M \ge`
:data:`MIN_STEPS` (or a method's own floor of steps: IVON's is higher). On small data the steps bind (digits' 1,437
rows: 12 steps an epoch, 250 epochs), on large data the passes (UCI protein's 41,157 rows: 322 steps an epoch, 50
epochs): a fixed count of steps would be a few passes there and leave the network underfitted.
"""

from __future__ import annotations

import math

MIN_EPOCHS, MIN_STEPS = 50, 3000
"""The default training's fewest passes over the data and fewest steps (chosen on the built-in data:
benchmarks/results/training_cost.md)."""


def steps_per_epoch(rows: int, batch_rows: int) -> int:
    r""":math:`M = \lceil N / B \rceil`: the last minibatch of an epoch holds the rest."""
    return math.ceil(rows / batch_rows)


def default_epochs(rows: int, batch_rows: int, min_steps: int = MIN_STEPS) -> int:
    r""":math:`E = \max(\text{MIN\_EPOCHS}, \lceil S / M \rceil)` on ``rows`` rows in batches of ``batch_rows``, with
    :math:`S` = ``min_steps`` (module notes)."""
    return max(MIN_EPOCHS, math.ceil(min_steps / steps_per_epoch(rows, batch_rows)))
