"""Fits are isolated and deterministic, for every method: order of fits, global state and save/load
change no number."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.models import BayesianMLP

BUDGET = {
    "svi": dict(steps=25, num_samples=20),
    "nuts": dict(num_warmup=20, num_samples=20, num_chains=1),
    "laplace": dict(num_samples=20, map_steps=300),
}
X = torch.linspace(-2, 2, 5).unsqueeze(-1)


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def first_model():
    return BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": None})


def other_model():
    return BayesianMLP(1, 1, hidden=(3,), activation="relu", prior="laplace", likelihood={"name": "gaussian", "scale": 0.3})


def smooth_model():
    """Laplace needs a prior with curvature and a smooth net: a Gaussian prior and tanh."""
    return BayesianMLP(1, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": 0.3})


# name -> (method, model, options): each fit of a pair below differs from the other in model and guide or method
FITS = {
    "autonormal": ("svi", first_model, dict(guide="autonormal", seed=7, **BUDGET["svi"])),
    "meanfield": ("svi", other_model, dict(guide="meanfield", seed=8, **BUDGET["svi"])),
    "empirical-bayes": ("svi", smooth_model, dict(guide="empirical-bayes", seed=9, **BUDGET["svi"])),
    "svi": ("svi", other_model, dict(seed=8, **BUDGET["svi"])),
    "nuts": ("nuts", first_model, dict(seed=7, **BUDGET["nuts"])),
    "laplace": ("laplace", smooth_model, dict(seed=7, **BUDGET["laplace"])),
}
PAIRS = [("autonormal", "meanfield"), ("meanfield", "empirical-bayes"), ("nuts", "svi"), ("laplace", "svi")]


def run(name: str, toy) -> Posterior:
    method, model, options = FITS[name]
    return fit(model(), toy, method, progress=False, **options)


@pytest.fixture(scope="module")
def solo(toy):
    """Each fit run alone (an empty param store), once."""
    done: dict[str, Posterior] = {}

    def alone(name: str) -> Posterior:
        if name not in done:
            pyro.get_param_store().clear()
            done[name] = run(name, toy)
        return done[name]

    return alone


def assert_same_fit(a: Posterior, b: Posterior) -> None:
    assert a.samples.keys() == b.samples.keys()
    for name in a.samples:
        assert torch.equal(a.samples[name], b.samples[name]), name
    torch.testing.assert_close(a.predict(X).mean, b.predict(X).mean, rtol=0, atol=0)
    torch.testing.assert_close(a.predict(X).std, b.predict(X).std, rtol=0, atol=0)


@pytest.mark.long
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # 20 + 20 draws need not converge
@pytest.mark.parametrize("first, second", PAIRS, ids=[f"{a}-then-{b}" for a, b in PAIRS])
def test_two_different_fits_in_one_process_equal_their_solo_runs(first, second, toy, solo):
    expected = solo(first), solo(second)
    pyro.get_param_store().clear()
    one = run(first, toy)
    torch.manual_seed(999)  # the caller's RNG state must not matter
    two = run(second, toy)  # the param store still holds the first fit's parameters
    assert_same_fit(one, expected[0])
    assert_same_fit(two, expected[1])


@pytest.mark.long
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")
@pytest.mark.parametrize("method", sorted(BUDGET))
def test_a_fit_gives_the_same_numbers_after_save_load(method, toy, solo, tmp_path):
    alone = solo(method if method != "svi" else "autonormal")
    alone.save(tmp_path / method)
    assert_same_fit(Posterior.load(tmp_path / method), alone)
