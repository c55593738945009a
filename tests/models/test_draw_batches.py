"""Draws a batch at a time: every draw once, in order, each batch within the activations' bound."""

from __future__ import annotations

import torch
from bnn.models import BayesianCNN, BayesianMLP, draw_batches


def test_each_batch_holds_at_most_the_bound_and_together_they_are_the_draws_in_order(monkeypatch):
    model = BayesianCNN(64, 3, input_shape=(8, 8))
    widest = max(model.activation_widths())
    monkeypatch.setattr(draw_batches, "VALUES_PER_BATCH", 5 * 10 * widest + 1)  # 5 draws of 10 rows, not 6
    values = {"w": torch.arange(23.0)[:, None].expand(23, 3), "b": torch.arange(23)}
    batches = list(draw_batches.draw_batches(model, 10, values))
    assert [len(batch["b"]) for batch in batches] == [5, 5, 5, 5, 3]
    assert torch.equal(torch.cat([batch["w"] for batch in batches]), values["w"])
    assert torch.equal(torch.cat([batch["b"] for batch in batches]), values["b"])


def test_more_rows_than_the_bound_allows_one_draw_still_come_one_draw_a_batch():
    model = BayesianMLP(2, 1, hidden=(4,))
    rows = draw_batches.VALUES_PER_BATCH  # times a width of 4: above the bound
    batches = list(draw_batches.draw_batches(model, rows, {"w": torch.zeros(3, 2)}))
    assert [batch["w"].shape for batch in batches] == [torch.Size([1, 2])] * 3
