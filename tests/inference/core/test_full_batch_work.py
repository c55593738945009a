"""The rule that sends a gradient method onto minibatches (bnn.inference.core.full_batch_work): the counted operations of
one example's gradient, and the work of a full-batch fit against its bound."""

from __future__ import annotations

import pytest
import torch
from bnn.inference.core.full_batch_work import (
    BATCH_SIZE,
    FULL_BATCH_WORK,
    example_flops,
    full_batch_affordable,
    full_batch_work,
    regime_rows,
)
from bnn.models import BayesianMLP


@pytest.mark.parametrize("likelihood", ["gaussian", "categorical"])
def test_one_examples_gradient_costs_its_matrix_products(likelihood):
    """A 3-4-2 network: the forward pass's products 2(3*4) + 2(4*2) = 40 operations, the backward pass's the two
    weight gradients (24 + 16) and the hidden layer's gradient (16), 96 in all; the likelihood adds no product."""
    assert example_flops(BayesianMLP(3, 2, hidden=(4,), likelihood=likelihood)) == 96


def test_the_count_leaves_the_random_state_as_it_was():
    """The targets are drawn under a forked random state: deciding the regime moves no seeded fit's draws."""
    torch.manual_seed(3)
    before = torch.get_rng_state()
    example_flops(BayesianMLP(3, 2, hidden=(4,), likelihood="categorical"))
    assert torch.equal(torch.get_rng_state(), before)


def test_the_work_is_gradients_times_rows_times_one_examples_count_against_the_bound():
    """Up to the bound a fit takes the full batch, beyond it a plain training's minibatches; with no network known
    (an estimate made before one is), the full batch."""
    model = BayesianMLP(3, 2, hidden=(4,))
    assert full_batch_work(model, 1000, 500) == 500 * 1000 * 96
    rows = int(FULL_BATCH_WORK // (96 * 1000))
    assert full_batch_affordable(model, rows, 1000) and not full_batch_affordable(model, rows + 1, 1000)
    assert regime_rows(model, rows, 1000) == rows and regime_rows(model, rows + 1, 1000) == BATCH_SIZE
    assert regime_rows(None, rows + 1, 1000) == rows + 1
