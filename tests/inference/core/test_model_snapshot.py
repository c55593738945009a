"""A fit keeps the model as it was fitted: later changes to the user's model reach neither the posterior,
its config, what it saves, nor its guide."""

from __future__ import annotations

import json
import threading

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import Posterior, fit
from bnn.inference.core.model_snapshot import snapshot_model
from bnn.models import BayesianMLP

X = torch.linspace(-2, 2, 5).unsqueeze(-1)


@pytest.fixture(scope="module")
def toy():
    return load_toy1d(n_train=30, n_test=10)


def small_model() -> BayesianMLP:
    return BayesianMLP(1, 1, hidden=(3,), prior="gaussian", likelihood={"name": "gaussian", "scale": 0.3})


@pytest.mark.parametrize("guide", ["autonormal", "meanfield"])
def test_a_prior_swap_after_the_fit_reaches_neither_the_fit_nor_what_it_saves(toy, tmp_path, guide):
    model = small_model()
    posterior = fit(model, toy, "svi", guide=guide, steps=10, num_samples=20, progress=False, seed=1)
    fitted_config, fitted_mean = model.config(), posterior.predict(X).mean
    model.prior = "laplace"
    model.likelihood = {"name": "gaussian", "scale": 2.0}
    assert posterior.model.config() == fitted_config
    assert posterior.model is not model
    assert "LaplacePrior" not in repr(posterior)
    torch.testing.assert_close(posterior.predict(X).mean, fitted_mean, rtol=0, atol=0)
    posterior.save(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "fit.json").read_text())["model"] == fitted_config
    assert Posterior.load(tmp_path / "run").model.config() == fitted_config
    posterior.extras["guide"](toy.x_train, toy.y_train)  # the guide holds the fitted model: no "prior changed" error


class HoldsALock(BayesianMLP):
    """A model with an attribute that no copy.deepcopy (nor pickle) can copy."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()


def test_a_model_deepcopy_refuses_is_copied_shallowly_and_still_kept_from_a_prior_swap():
    model = HoldsALock(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    with pytest.raises(TypeError):
        __import__("copy").deepcopy(model)
    snapshot = snapshot_model(model)
    assert snapshot is not model and snapshot.lock is model.lock
    model.prior = "laplace"
    assert snapshot.prior_config() == {"*": {"name": "gaussian", "scale": 1.0, "fan_in_scaling": False}}


class RefusesCopies(BayesianMLP):
    def __reduce_ex__(self, protocol):
        raise RuntimeError("this model has a handle on a device")


def test_a_model_that_cannot_be_copied_at_all_is_refused_before_the_fit_with_the_fix(toy):
    model = RefusesCopies(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3})
    with pytest.raises(ValueError, match=r"the model cannot be copied \(RuntimeError: this model has a handle on a "
                                         r"device\).*give its class a __copy__ or __deepcopy__"):
        fit(model, toy, "svi", steps=1, num_samples=2, progress=False)
