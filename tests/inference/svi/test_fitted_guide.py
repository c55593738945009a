"""The guide an SVI fit hands out carries its own parameters: whatever Pyro's global store holds later,
``Predictive(model, guide=posterior.extras["guide"])`` gives the fit's numbers, and the store is left as found."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.models import BayesianMLP
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

X = torch.linspace(-2, 2, 7).unsqueeze(-1)


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def small_model() -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})


def predictive_mean(model, guide) -> torch.Tensor:
    pyro.set_rng_seed(0)
    return Predictive(model, guide=guide, num_samples=50, return_sites=["obs"])(X)["obs"].mean(0)


def unrelated_autonormal_fit(toy) -> None:
    """Three steps of Pyro's own SVI with AutoNormal on another model, in the global store (the same names)."""
    other = BayesianMLP(1, 1, hidden=(3,), prior="laplace", likelihood={"name": "gaussian", "scale": 1.0})
    svi = SVI(other, AutoNormal(other), pyro.optim.Adam({"lr": 0.5}), Trace_ELBO())
    for _ in range(3):
        svi.step(toy.x_train, toy.y_train)


@pytest.mark.parametrize("guide", ["autonormal", "meanfield"])
def test_the_fits_guide_gives_the_fits_numbers_whatever_the_global_store_holds(toy, guide):
    pyro.clear_param_store()
    model = small_model()
    posterior = fit(model, toy, "svi", guide=guide, steps=30, num_samples=10, progress=False, seed=3)
    fitted_guide = posterior.extras["guide"]
    own = predictive_mean(model, fitted_guide)
    names = list(posterior.extras["param_state"]["params"])

    unrelated_autonormal_fit(toy)
    store_before = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    torch.testing.assert_close(predictive_mean(model, fitted_guide), own, rtol=0, atol=0)
    store_after = {name: value.detach() for name, value in pyro.get_param_store().items()}
    assert store_after.keys() == store_before.keys()  # the call leaves the global store as it found it
    assert all(torch.equal(store_after[name], store_before[name]) for name in store_before)

    pyro.clear_param_store()
    torch.testing.assert_close(predictive_mean(model, fitted_guide), own, rtol=0, atol=0)
    assert not pyro.get_param_store().keys()

    with pyro.get_param_store().scope(state=posterior.extras["param_state"]):
        same_names = {name: value.detach().clone() for name, value in pyro.get_param_store().items()}
    pyro.get_param_store().set_state({"params": {k: torch.full_like(v, 3.0) for k, v in same_names.items()},
                                      "constraints": {}})
    assert set(names) <= set(pyro.get_param_store().keys())
    torch.testing.assert_close(predictive_mean(model, fitted_guide), own, rtol=0, atol=0)
    pyro.clear_param_store()


def test_the_bare_guide_would_read_the_global_store(toy):
    """What the binding prevents: Pyro's AutoNormal reads same-named parameters from the global store."""
    pyro.clear_param_store()
    model = small_model()
    posterior = fit(model, toy, "svi", guide="autonormal", steps=30, num_samples=10, progress=False, seed=3)
    own = predictive_mean(model, posterior.extras["guide"])
    unrelated_autonormal_fit(toy)
    assert not torch.allclose(predictive_mean(model, posterior.extras["guide"].guide), own)
    pyro.clear_param_store()
