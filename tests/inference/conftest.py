"""Fixtures of the method tests: a small regression and a small network with a learned noise (a module may define its
own ``toy`` or ``model`` instead)."""

from __future__ import annotations

import pytest
from bnn.datasets import load_toy1d
from bnn.models import BayesianMLP


@pytest.fixture(scope="module")
def toy():
    """toy1d with 30 training and 20 test points."""
    return load_toy1d(n_train=30, n_test=20)


@pytest.fixture(scope="module")
def model():
    """A 1-3-1 tanh network with a learned Gaussian noise."""
    return BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})
