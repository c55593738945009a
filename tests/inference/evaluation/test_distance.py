"""The distance to the nearest training input, and the sd-against-distance picture built on it."""

from __future__ import annotations

import matplotlib.image
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.distance import nearest_training_distance
from bnn.inference.evaluation.plots import plot_std_vs_distance
from bnn.models import BayesianMLP


def test_the_distance_is_to_the_nearest_training_row():
    x_train = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    x = torch.tensor([[0.0, 0.0], [3.0, 0.0], [6.0, 8.0], [1.0, 1.0]])
    assert torch.allclose(nearest_training_distance(x, x_train), torch.tensor([0.0, 3.0, 5.0, 2**0.5]))


def test_the_distance_of_a_1d_grid_is_zero_on_the_data_and_grows_in_the_gap():
    x_train = torch.tensor([[-1.0], [-0.5], [0.5], [1.0]])
    grid = torch.tensor([[-1.0], [0.0], [0.25], [2.0]])
    assert nearest_training_distance(grid, x_train).tolist() == [0.0, 0.5, 0.25, 1.0]


@pytest.mark.parametrize(("x", "x_train", "message"), [
    (torch.zeros(3), torch.zeros(2, 1), "must be"),
    (torch.zeros(3, 2), torch.zeros(2, 1), "same d"),
    (torch.zeros(3, 1), torch.zeros(0, 1), "x_train is empty"),
])
def test_bad_shapes_are_named(x, x_train, message):
    with pytest.raises(ValueError, match=message):
        nearest_training_distance(x, x_train)


@pytest.mark.long
def test_the_picture_is_written(tmp_path):
    data = load_toy1d(n_train=30, n_test=10)
    model = BayesianMLP(1, 1, hidden=(5,))
    fits = {"map": fit(model, data, "map", map_steps=30, progress=False),
            "laplace": fit(model, data, "laplace", map_steps=30, num_samples=20, progress=False)}
    path = plot_std_vs_distance(fits, data, tmp_path / "sd.png")
    assert matplotlib.image.imread(path).shape[0] > 100
