"""A saved folder is data, not code: a planted pickle never runs, every file is checked against the SHA-256 its
``fit.json`` lists, a file from elsewhere is refused by name, and a network made from a torch module is rebuilt from
the module given again (or, only under ``trust=True``, unpickled)."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.inference.core.posterior_files import FIT_FILE, sha256
from bnn.models import BayesianMLP, from_module
from bnn.models.network import ModuleMismatchError
from torch import nn

from bnn.experiments.comparison.finished_fits import FinishedFits
from bnn.runtime.atomic import MARKER

X = torch.linspace(-1, 1, 24).unsqueeze(-1)
Y = torch.sin(3 * X).squeeze(-1)
LIKELIHOOD = {"name": "gaussian", "scale": 0.1}
QUICK_MAP = {"map_steps": 20, "map_max_iter": 5}


class Payload:
    """Unpickling it runs a shell command that leaves a file behind: the proof that a pickle ran."""

    def __init__(self, proof) -> None:
        self.proof = str(proof)

    def __reduce__(self):
        return os.system, (f"touch {self.proof}",)


def tanh_module(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Linear(4, 1))


def quiet_fit(model, method="map", **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(model, (X, Y), method, seed=0, progress=False, **QUICK_MAP, **options)


@pytest.fixture(scope="module")
def mlp_fit():
    return quiet_fit(BayesianMLP(1, 1, hidden=(3,), likelihood=LIKELIHOOD))


@pytest.fixture(scope="module")
def module_fit():
    return quiet_fit(from_module(tanh_module(), bayesian="last-layer", likelihood=LIKELIHOOD), map_options=QUICK_MAP)


@pytest.mark.parametrize("wrapped", [False, True], ids=["bare pickle", "inside a valid torch.save file"])
@pytest.mark.parametrize("listed_by_marker", [False, True])
def test_a_pickle_planted_as_network_pt_never_runs_and_is_refused_by_name(mlp_fit, tmp_path, wrapped,
                                                                          listed_by_marker):
    folder, proof = mlp_fit.save(tmp_path / "run"), tmp_path / "pwned"
    payload = {"module": Payload(proof)} if wrapped else Payload(proof)
    if wrapped:
        torch.save(payload, folder / "network.pt")
    else:
        (folder / "network.pt").write_bytes(__import__("pickle").dumps(payload))
    if listed_by_marker:  # an attacker may edit the marker too: a posterior file fit.json does not list is refused
        marker = json.loads((folder / MARKER).read_text())
        (folder / MARKER).write_text(json.dumps({**marker, "files": [*marker["files"], "network.pt"]}))
    with pytest.raises(ValueError, match=r"network.pt is not one of the files this fit wrote \(fit.json lists "
                                         r"\['posterior.nc'\]\).*nothing was loaded: remove it"):
        Posterior.load(folder)
    assert not proof.exists()


def test_a_file_changed_after_the_fit_or_taken_from_another_fit_is_refused_before_any_is_read(mlp_fit, tmp_path):
    first = mlp_fit.save(tmp_path / "first")
    quiet_fit(BayesianMLP(1, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.2})).save(tmp_path / "second")
    shutil.copy(tmp_path / "second" / "posterior.nc", first / "posterior.nc")
    with pytest.raises(ValueError, match=r"first/posterior.nc is not the file this fit wrote: its SHA-256 differs from "
                                         r"the one .*fit.json lists \(changed since, or from another fit\)"):
        Posterior.load(first)
    (first / "posterior.nc").unlink()
    with pytest.raises(ValueError, match=r"first is not a saved posterior: posterior.nc is missing"):
        Posterior.load(first)


def test_any_file_the_fit_did_not_write_is_named_and_a_listed_one_that_is_missing_too(module_fit, tmp_path):
    folder = module_fit.save(tmp_path / "run")
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"run/notes.txt is not one of the files this fit wrote"):
        Posterior.load(folder, module=tanh_module())
    (folder / "notes.txt").unlink()
    (folder / "module.pt").unlink()
    with pytest.raises(ValueError, match=r"run/module.pt is missing: .*fit.json lists it among the fit's files"):
        Posterior.load(folder, module=tanh_module())
    meta = json.loads((folder / FIT_FILE).read_text())
    (folder / FIT_FILE).write_text(json.dumps({**meta, "files": {"../outside": "0" * 64}}))
    with pytest.raises(ValueError, match=r"fit.json lists '../outside', which is not a posterior's file"):
        Posterior.load(folder, module=tanh_module())


def test_a_torch_module_network_is_saved_as_tensors_and_rebuilt_from_the_module_given_again(module_fit, tmp_path):
    folder = module_fit.save(tmp_path / "run")
    listed = json.loads((folder / FIT_FILE).read_text())["files"]
    assert sorted(listed) == ["module.pt", "network.safetensors", "posterior.nc"]
    assert all(sha256(folder / name) == digest for name, digest in listed.items())
    with pytest.raises(ModuleMismatchError, match=r"run: this network was made from a torch module \(Sequential\), "
                                                  r"whose structure is code.*Posterior.load\(path, module=YourModule"
                                                  r".*trust=True to unpickle module.pt"):
        Posterior.load(folder)
    given = tanh_module(seed=7)  # the same structure with other weights: the saved weights fill a copy of it
    before = {name: value.clone() for name, value in given.state_dict().items()}
    loaded = Posterior.load(folder, module=given)
    assert all(torch.equal(given.state_dict()[name], value) for name, value in before.items())
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, module_fit.predict(X, seed=0).mean)
    for name, value in module_fit.model.point_values.items():
        torch.testing.assert_close(loaded.model.point_values[name], value)
    trusted = Posterior.load(folder, trust=True)
    torch.testing.assert_close(trusted.predict(X, seed=0).mean, module_fit.predict(X, seed=0).mean)


@pytest.mark.parametrize("module, message", [
    (nn.Sequential(nn.Linear(1, 4), nn.ReLU(), nn.Linear(4, 1)), r"the module given is not the one saved: its "
     r"structure is\nSequential\((?s:.*)ReLU(?s:.*)and the saved one\n(?s:.*)Tanh"),
    (nn.Sequential(nn.Linear(1, 5), nn.Tanh(), nn.Linear(5, 1)), r"the module given is not the one saved"),
    ("not a module", r"module must be a torch.nn.Module, got str"),
], ids=["Tanh swapped for ReLU", "other widths", "not a module"])
def test_another_module_is_refused_with_what_differs(module_fit, tmp_path, module, message):
    folder = module_fit.save(tmp_path / "run")
    with pytest.raises(ModuleMismatchError, match=message):
        Posterior.load(folder, module=module)


def test_a_module_given_for_a_network_built_from_its_config_is_refused(mlp_fit, tmp_path):
    with pytest.raises(ModuleMismatchError, match=r"module= is for a network made from a torch module .*this one is a "
                                                  r"'mlp' network.*leave module out"):
        Posterior.load(mlp_fit.save(tmp_path / "run"), module=tanh_module())


def test_trust_unpickles_only_the_module_the_fit_wrote(module_fit, tmp_path):
    folder, proof = module_fit.save(tmp_path / "run"), tmp_path / "pwned"
    torch.save(Payload(proof), folder / "module.pt")
    with pytest.raises(ValueError, match=r"module.pt is not the file this fit wrote"):
        Posterior.load(folder, trust=True)
    assert not proof.exists()


def test_a_module_whose_class_cannot_be_pickled_saves_and_loads_given_again(tmp_path):
    class Local(nn.Module):  # defined in a function: no pickler finds it again
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.body = nn.Sequential(nn.Linear(1, 3), nn.Tanh(), nn.Linear(3, 1))

        def forward(self, x):
            return self.body(x)

    posterior = quiet_fit(from_module(Local(), likelihood=LIKELIHOOD))
    folder = posterior.save(tmp_path / "run")
    assert not (folder / "module.pt").exists()
    loaded = Posterior.load(folder, module=Local())
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, posterior.predict(X, seed=0).mean)


def test_compare_reuses_a_kept_module_fit_with_its_module_without_unpickling(module_fit, tmp_path, monkeypatch):
    module = tanh_module()
    kept = FinishedFits(tmp_path / "out", {"fits": ["map"]}, module=module)
    kept.save(0, "map", module_fit)
    unpickling = torch.load
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: pytest.fail("unpickled") if not kwargs.get(
        "weights_only", True) else unpickling(*args, **kwargs))
    reused = kept.load(0, "map")
    torch.testing.assert_close(reused.predict(X, seed=0).mean, module_fit.predict(X, seed=0).mean)
