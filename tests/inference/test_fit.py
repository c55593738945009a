"""Bad input gets a ValueError naming the problem before any work starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.models import BayesianMLP, GaussianPrior

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
        (BayesianMLP(2, 1), (X[:1], Y[:1]), "laplace", "the data has a single training row: .* give two rows or more"),
        (BayesianMLP(2, 1), (X, torch.full((10,), 3.5)), "nuts",
         r"the regression target is constant \(3.5 in every training row\): nothing to learn"),
        (BayesianMLP(2, 1), (X, Y), "magic", "unknown method 'magic'; choose from"),
        (BayesianMLP(2, 1), X, "svi", "data must be a Dataset, a pair"),
    ],
)
def test_bad_data_and_names(model, data, method, message):
    with pytest.raises(ValueError, match=message):
        fit(model, data, method, progress=False)


class PriorOffTheCPU(GaussianPrior):
    """A Gaussian prior holding a tensor on another device than the CPU (``meta``: this machine has no GPU)."""

    def __init__(self, scale: float) -> None:
        super().__init__(scale)
        self.loc = torch.tensor(0.0, device="meta")


@pytest.mark.parametrize(
    "model, data, options, error, message",
    [
        (None, (X, Y), {}, TypeError, "model must be a BayesianNetwork .* got NoneType"),
        ("BayesianMLP(2, 1)", (X, Y), {}, TypeError, "model must be a BayesianNetwork .* got str"),
        (BayesianMLP(2, 1), (X, Y), {"guide_options": [1]}, ValueError, r"guide_options must be a mapping .* got \[1\]"),
        (BayesianMLP(2, 1), (X, Y), {"steps": np.float64(2)}, ValueError, r"steps must be a positive integer, got np.float64"),
        (BayesianMLP(2, 1), (X.to("meta"), Y), {}, ValueError, "inputs x is on the 'meta' device; .* x.cpu()"),
        (BayesianMLP(2, 1), (X, Y.to("meta")), {}, ValueError, "targets y is on the 'meta' device"),
        (BayesianMLP(2, 1, prior=PriorOffTheCPU(1.0)), (X, Y), {},
         ValueError, "the model's PriorOffTheCPU holds loc on the 'meta' device; .* loc.cpu()"),
    ],
    ids=["model None", "model a string", "guide_options a list", "steps a float", "x on another device",
         "y on another device", "a prior on another device"],
)
def test_bad_arguments_are_named_before_any_work(model, data, options, error, message):
    with pytest.raises(error, match=message):
        fit(model, data, "svi", progress=False, **options)


def test_numpy_integers_are_taken_where_integers_are(monkeypatch):
    posterior = fit(BayesianMLP(2, 1, hidden=(2,)), (X, Y), "svi", steps=np.int64(2), num_samples=np.int32(5),
                    seed=np.uint8(3), progress=False)
    assert posterior.record.steps == 2 and posterior.num_draws == 5 and posterior.record.seed == 3
