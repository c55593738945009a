"""The signal and image data sets, ``digits`` and ``mnist1d``: their shapes, classes, splits, and no download."""

from __future__ import annotations

import random
import socket

import numpy as np
import pytest
import torch
from bnn.datasets import Dataset, load_dataset, load_digits_images, load_mnist1d
from sklearn.datasets import load_digits


@pytest.fixture
def offline(monkeypatch):
    """Any network connection fails the test."""
    monkeypatch.setattr(socket.socket, "connect", lambda *args: pytest.fail("a data set tried to connect to the network"))


def test_digits_are_the_bundled_8x8_images_in_a_stratified_split_fixed_by_the_seed(offline):
    data = load_dataset("digits")
    assert (data.task, data.input_shape, data.in_features, data.out_features) == ("multiclass", (8, 8), 64, 10)
    assert (data.x_train.shape[0], data.x_test.shape[0]) == (1437, 360)
    images, labels = load_digits(return_X_y=True)
    raw = data.x_scaler.inverse(torch.cat([data.x_train, data.x_test])).double()
    assert sorted(map(tuple, raw.round().tolist())) == sorted(map(tuple, images.tolist()))  # the same 1,797 rows
    # stratified: each class's share of the test split is its share of the data, within one image
    test_counts = torch.bincount(data.y_test.long(), minlength=10).double()
    assert torch.all((test_counts - torch.from_numpy(np.bincount(labels)) * 0.2).abs() <= 1)
    assert torch.equal(load_digits_images(seed=0).x_train, data.x_train)
    assert not torch.equal(load_digits_images(seed=1).y_train, data.y_train)


@pytest.mark.long  # each generation takes about 4 s
def test_mnist1d_is_the_published_benchmark_at_seed_0_and_another_draw_at_another_seed(offline):
    from mnist1d.data import make_dataset

    np.random.seed(7)
    random.seed(7)
    numpy_state, python_draw = np.random.get_state()[1].copy(), random.random()
    random.seed(7)
    data = load_mnist1d()
    assert np.array_equal(np.random.get_state()[1], numpy_state) and random.random() == python_draw  # states restored
    assert (data.task, data.input_shape, data.in_features, data.out_features) == ("multiclass", (40,), 40, 10)
    assert (data.x_train.shape[0], data.x_test.shape[0]) == (4000, 1000)
    benchmark = make_dataset()  # its default arguments: the published data set
    np.testing.assert_array_equal(data.y_train.numpy(), benchmark["y"])
    np.testing.assert_array_equal(data.y_test.numpy(), benchmark["y_test"])
    np.testing.assert_allclose(data.x_scaler.inverse(data.x_test).numpy(), benchmark["x_test"], atol=1e-5)
    assert sorted(torch.unique(data.y_train).tolist()) == list(range(10))
    other = load_dataset("mnist1d", seed=1)
    assert other.x_train.shape == data.x_train.shape and not torch.equal(other.x_train, data.x_train)


@pytest.mark.slow  # seconds to generate; make test checks mnist1d's generator at its 4,000 signals
def test_mnist1d_40k_is_the_same_generator_at_ten_times_the_signals(offline):
    data = load_dataset("mnist1d-40k")
    assert (data.name, data.task, data.input_shape, data.out_features) == ("mnist1d-40k", "multiclass", (40,), 10)
    assert (data.x_train.shape[0], data.x_test.shape[0]) == (40_000, 10_000)
    counts = torch.bincount(data.y_train.long(), minlength=10)
    assert counts.min() > 0.09 * 40_000 and counts.max() < 0.11 * 40_000  # the generator's classes are balanced
    with pytest.raises(ValueError, match="signals must be an integer of at least 10, got 5"):
        load_mnist1d(signals=5)


def test_mnist1d_never_calls_the_downloading_loader(monkeypatch, offline):
    import mnist1d.data

    monkeypatch.setattr(mnist1d.data, "get_dataset", lambda *args, **kwargs: pytest.fail("get_dataset downloads"))
    monkeypatch.setattr(mnist1d.data, "make_dataset", lambda args: {  # the generator itself is tested above (long)
        "x": np.random.randn(20, 40), "y": np.arange(20) % 10, "x_test": np.random.randn(5, 40), "y_test": np.arange(5)})
    assert load_mnist1d().input_shape == (40,)


def test_an_input_shape_must_hold_the_features():
    x, y = np.random.default_rng(0).normal(size=(4, 6)), np.array([0, 1, 0, 1])
    assert Dataset.from_arrays("a", "binary", x, y, x, y, input_shape=(2, 3)).input_shape == (2, 3)
    assert Dataset.from_arrays("a", "binary", x, y, x, y).input_shape is None
    with pytest.raises(ValueError, match=r"input_shape \(4, 2\) holds 8 values per row but data set 'a' has 6 features"):
        Dataset.from_arrays("a", "binary", x, y, x, y, input_shape=(4, 2))
