"""Fits are isolated and deterministic, for every method: order of fits, global state and save/load
change no number."""

from __future__ import annotations

import pyro
import pytest
import torch

from bnn_data import load_toy1d
from inference import Posterior, fit
from models import BayesianMLP

BUDGET = {
    "svi": dict(steps=25, num_draws=20),
    "nuts": dict(num_warmup=20, num_samples=20, num_chains=1),
    "laplace": dict(num_draws=20),
}


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def first_model():
    return BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})


def other_model():
    return BayesianMLP(1, 1, hidden=(3,), activation="relu", prior="laplace", likelihood={"name": "gaussian", "scale": 0.3})


def same_draws(a: Posterior, b: Posterior) -> bool:
    return a.samples.keys() == b.samples.keys() and all(torch.equal(a.samples[k], b.samples[k]) for k in a.samples)


@pytest.mark.parametrize("method", sorted(BUDGET))
def test_a_fit_gives_the_same_numbers_alone_after_another_fit_and_after_save_load(method, toy, tmp_path):
    options = dict(seed=7, progress=False, **BUDGET[method])
    alone = fit(first_model(), toy, method, **options)
    pyro.get_param_store().clear()
    other_options = dict(options, seed=8)
    if method == "laplace":  # Laplace needs a prior with curvature and a smooth net: a Gaussian prior and tanh
        other = BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": 0.3})
    else:
        other = other_model()
    fit(other, toy, method, **other_options)
    torch.manual_seed(999)  # the caller's RNG state must not matter
    again = fit(first_model(), toy, method, **options)
    assert same_draws(alone, again)
    x = torch.linspace(-2, 2, 5).unsqueeze(-1)
    torch.testing.assert_close(again.predict(x).mean, alone.predict(x).mean, rtol=0, atol=0)
    alone.save(tmp_path / method)
    loaded = Posterior.load(tmp_path / method)
    assert same_draws(alone, loaded)
    torch.testing.assert_close(loaded.predict(x).mean, alone.predict(x).mean, rtol=0, atol=0)
    torch.testing.assert_close(loaded.predict(x).std, alone.predict(x).std, rtol=0, atol=0)
