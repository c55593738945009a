"""Bad input gets a ValueError naming the problem before any work starts."""

from __future__ import annotations

import pytest
import torch
from bnn.inference import fit
from bnn.models import BayesianMLP

X = torch.randn(10, 2)
Y = torch.randn(10)


@pytest.mark.parametrize(
    "model, data, method, message",
    [
        (BayesianMLP(2, 1), (X.clone().index_put_((torch.tensor([3]),), torch.tensor(float("nan"))), Y),
         "svi", "inputs x contains NaN"),
        (BayesianMLP(2, 1), (X, Y.clone().index_fill_(0, torch.tensor([2]), float("inf"))), "svi",
         "targets y contains infinite values"),
        (BayesianMLP(2, 1), (X, Y[:9]), "svi", "x has 10 rows, y has 9"),
        (BayesianMLP(3, 1), (X, Y), "svi", "the model reads 3 input features but x has 2"),
        (BayesianMLP(2, 1, likelihood="bernoulli"), (X, Y), "svi", "binary labels must be 0 or 1"),
        (BayesianMLP(2, 3, likelihood="categorical"), (X, torch.arange(10)), "svi", r"must lie in 0..2"),
        (BayesianMLP(2, 1), (torch.zeros(0, 2), torch.zeros(0)), "svi", "is empty"),
        (BayesianMLP(2, 1), (X, Y), "magic", "unknown method 'magic'; choose from"),
        (BayesianMLP(2, 1), X, "svi", "data must be a Dataset or a pair"),
    ],
)
def test_bad_data_and_names(model, data, method, message):
    with pytest.raises(ValueError, match=message):
        fit(model, data, method, progress=False)
