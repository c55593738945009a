from __future__ import annotations

import numpy as np
import pytest
import torch
from bnn.datasets import DATASETS, TASKS, Dataset, load_dataset, load_toy1d, toy_function
from bnn.datasets.toy import NOISE

LARGE = {"mnist1d-40k"}
"""Data sets whose generation alone takes a while (MNIST-1D at 50,000 signals): the slow tier; their own tests are in
tests/datasets/test_image_sets.py."""


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name in LARGE else
                                  pytest.param(name, marks=pytest.mark.long) if name == "mnist1d" else name  # 4 s
                                  for name in DATASETS.names()])
def test_built_in_data_sets_are_standardised_with_training_statistics(name):
    data = load_dataset(name)
    torch.testing.assert_close(data.x_train.mean(0), torch.zeros(data.in_features), atol=1e-5, rtol=0)
    assert not torch.allclose(data.x_test.mean(0), torch.zeros(data.in_features), atol=1e-6)
    assert data.x_train.shape[0] == data.y_train.shape[0] and data.x_test.shape[0] == data.y_test.shape[0]
    assert data.task in TASKS


def test_toy1d_has_a_gap_and_known_noise():
    data = load_toy1d()
    x = data.x_scaler.inverse(data.x_train)[:, 0]
    assert ((x > -0.35) & (x < 0.35)).sum() == 0
    residual = data.y_scaler.inverse(data.y_train) - toy_function(x)
    # the sample sd of 100 Gaussian residuals lies within 4 standard errors (sd / sqrt(2n)) of NOISE
    assert abs(residual.std().item() - NOISE) < 4 * NOISE / np.sqrt(200)
    assert torch.equal(load_toy1d().x_train, data.x_train)


def test_unknown_dataset_names_the_choices():
    with pytest.raises(ValueError, match="unknown dataset 'mnist'; choose from"):
        load_dataset("mnist")


@pytest.mark.parametrize(
    "x, y, message",
    [
        ([[1.0], [float("nan")]], [1.0, 2.0], r"inputs x contains NaN \(1 entries, first in row 1\)"),
        ([[1.0], [2.0]], [1.0, float("inf")], "targets y contains infinite values"),
        ([[1.0], [2.0]], [1.0], "differ in length"),
        ([1.0, 2.0], [1.0, 2.0], "inputs x must be 2-D"),
        (np.zeros((0, 2)), np.zeros(0), "is empty"),
        ([["a"], ["b"]], [1.0, 2.0], "must be numeric"),
        ([[1.0], [2.0]], np.zeros((2, 1, 1)), r"targets y must have shape \(n,\)"),
        ([[1.0]], [1.0], "a single training row: it cannot be standardised"),
        ([[1.0], [2.0], [3.0]], [4.0, 4.0, 4.0], r"constant regression target \(4.0 in every training row\): zero variance"),
        ([[1.0], [4e38]], [1.0, 2.0], "inputs x has values too large for torch.float32"),
        (torch.ones(2, 1, device="meta"), [1.0, 2.0], "inputs x is on the 'meta' device; the collection takes data on the CPU"),
    ],
)
def test_bad_arrays_are_refused(x, y, message):
    with pytest.raises(ValueError, match=message):
        Dataset.from_arrays("bad", "regression", x, y, [[0.0]], [0.0])


def test_values_near_the_float32_limit_are_standardised_in_float64():
    x = np.array([[3e38], [3e38], [1e38]])  # in float32 their sum, and so the mean, overflows to infinity
    data = Dataset.from_arrays("large", "regression", x, -x[:, 0], [[2e38]], [-2e38])
    z = (x[:, 0] - x.mean()) / x.std()  # NumPy's float64 standardisation
    assert data.x_train.dtype == torch.get_default_dtype()
    np.testing.assert_allclose(data.x_train[:, 0].numpy(), z, rtol=1e-6)
    np.testing.assert_allclose(data.y_train.numpy(), -z, rtol=1e-6)
    np.testing.assert_allclose(data.x_scaler.inverse(data.x_test).numpy(), [[2e38]], rtol=1e-6)
