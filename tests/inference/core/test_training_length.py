from __future__ import annotations

import math

from bnn.inference.core.training_length import MIN_EPOCHS, MIN_STEPS, default_epochs, steps_per_epoch


def test_an_epoch_is_the_minibatches_that_cover_the_rows_the_last_holding_the_rest():
    assert [steps_per_epoch(rows, 8) for rows in (1, 8, 9, 33)] == [1, 1, 2, 5]


def test_the_default_is_the_fewest_epochs_that_give_both_the_passes_and_the_steps():
    assert (MIN_EPOCHS, MIN_STEPS) == (50, 3000)
    assert default_epochs(100, 128) == 3000  # one batch an epoch: the steps bind
    assert default_epochs(1437, 128) == 250  # digits: 12 steps an epoch, 250 x 12 = 3,000
    assert default_epochs(4000, 128) == math.ceil(3000 / 32) == 94  # MNIST-1D: 94 x 32 = 3,008 steps
    assert default_epochs(41_157, 128) == 50  # UCI protein: 322 steps an epoch, the passes bind (16,100 steps)
    assert default_epochs(4000, 128, min_steps=9000) == 282 and default_epochs(41_157, 128, min_steps=9000) == 50
