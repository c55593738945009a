"""``device=``: ``"cuda"`` without a GPU, an unknown device and a GPU for a method that computes on the CPU are refused
before any work, saying what to use; ``"auto"`` computes on the CPU where there is no GPU; the pieces of a GPU fit that
a CPU can run (tensors made on the chosen device, the posterior brought back, members kept in this process) work; and,
where torch sees a GPU, every method fits there (tests marked ``gpu``)."""

from __future__ import annotations

import pytest
import torch
from bnn.datasets import load_toy1d
from bnn.inference import METHODS, fit
from bnn.inference.core import method as method_module
from bnn.inference.core.device import Device, computing_on, device_option, moved, on_gpu, resolved_device
from bnn.inference.map_search import map_starts
from bnn.models import PRIORS, BayesianCNN, BayesianMLP, from_module
from torch import nn

from tests.support.prior_examples import example_prior
from tests.support.quick_options import QUICK, SECONDS

ROWS = 40


@pytest.fixture(scope="module")
def rows():
    data = load_toy1d()
    return data.x_train[:ROWS], data.y_train[:ROWS]


def test_an_unknown_device_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"unknown device 'tpu'; choose from \['cpu', 'cuda', 'auto'\]"):
        device_option("device", "tpu")
    assert device_option("device", torch.device("cpu")) is Device.CPU


def test_cuda_without_a_gpu_is_refused_before_any_work(rows, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    started = []
    monkeypatch.setattr(method_module, "snapshot_model", lambda model: started.append(model))  # the fit's first step
    with pytest.raises(ValueError, match=r"device='cuda', and torch sees no CUDA device here .* use device='cpu', or "
                                         r"device='auto'"):
        fit(BayesianMLP(1, 1, hidden=(4,)), rows, "map", device="cuda")
    assert not started


def test_a_method_that_computes_on_the_cpu_refuses_a_gpu_and_takes_the_cpu_for_auto(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a machine with a GPU
    with pytest.raises(ValueError, match=r"nuts computes on the CPU \(its chains run in CPU worker processes.*\): use "
                                         r"device='cpu' or 'auto'"):
        METHODS.get("nuts").parse({"device": "cuda"})
    assert METHODS.get("nuts").parse({"device": "auto"}).device is Device.AUTO
    assert resolved_device(Device.AUTO, gpu=False) == torch.device("cpu")
    assert resolved_device(Device.AUTO) == torch.device("cuda")


def test_auto_computes_on_the_cpu_without_a_gpu(rows, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    posterior = fit(BayesianMLP(1, 1, hidden=(4,)), rows, "map", seed=0, progress=False, device="auto", **QUICK["map"])
    default = fit(BayesianMLP(1, 1, hidden=(4,)), rows, "map", seed=0, progress=False, **QUICK["map"])
    assert posterior.record.device == "cpu" and posterior.record.options.device is Device.AUTO
    for name, value in default.samples.items():
        assert torch.equal(posterior.samples[name], value), name


def test_tensors_made_without_a_device_are_made_on_the_chosen_one():
    with computing_on(torch.device("meta")):
        assert torch.zeros(2).device.type == "meta" and on_gpu()
    with computing_on(torch.device("cpu")):
        assert torch.zeros(2).device.type == "cpu" and not on_gpu()


def test_a_gpu_fit_runs_its_members_in_this_process(rows, monkeypatch):
    """Worker processes compute on the CPU: on a GPU the members of an ensemble asked to run in parallel run in
    sequence (here the "GPU" is a stand-in: only where the members run is tested)."""
    monkeypatch.setattr(map_starts, "on_gpu", lambda: True)
    monkeypatch.setattr(map_starts, "_in_processes", lambda *args: pytest.fail("members sent to worker processes"))
    posterior = fit(BayesianMLP(1, 1, hidden=(4,)), rows, "ensemble", seed=0, progress=False,
                    **{**QUICK["ensemble"], "member_method": "parallel"})
    assert posterior.num_draws == QUICK["ensemble"]["num_members"]


NETWORKS = {
    "mlp": lambda prior: BayesianMLP(3, 2, hidden=(4,), prior=prior, likelihood="categorical"),
    "cnn": lambda prior: BayesianCNN(16, 2, input_shape=(4, 4), channels=(2,), hidden=(), prior=prior,
                                     likelihood="categorical"),
    "torch-module": lambda prior: from_module(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), prior=prior),
}


@pytest.mark.parametrize("network, prior", [(network, prior) for network in sorted(NETWORKS) for prior in PRIORS.names()
                                            if (network, prior) != ("cnn", "ard")])  # ARD is for dense layers
def test_every_network_and_prior_goes_to_a_device_whole(network, prior):
    """A GPU fit moves a copy of its network by the same round trip: every architecture with every prior survives it
    and computes as before."""
    model = NETWORKS[network]("gaussian")
    model = NETWORKS[network](example_prior(prior, model.sites))
    copy = moved(model, torch.device("cpu"))
    weights = {site.name: torch.randn(site.shape, generator=torch.Generator().manual_seed(k))
               for k, site in enumerate(model.sites)}
    x = torch.randn(5, model.in_features, generator=torch.Generator().manual_seed(9))
    assert copy is not model and repr(copy) == repr(model)
    torch.testing.assert_close(copy.forward(x, weights), model.forward(x, weights), rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # quick fits
@pytest.mark.parametrize("method", [pytest.param(name, marks=pytest.mark.long) if name in SECONDS else name
                                    for name in METHODS.names()])
def test_every_posterior_comes_back_from_a_device_whole(method, rows):
    """A GPU fit's posterior is brought to the CPU by a copy through torch.save and torch.load: every method's
    posterior survives that copy and predicts as before."""
    posterior = fit(BayesianMLP(1, 1, hidden=(4,)), rows, method, seed=0, progress=False, **QUICK[method])
    copy = moved(posterior, torch.device("cpu"))
    grid = torch.linspace(-1, 1, 5).unsqueeze(-1)
    assert copy is not posterior and copy.record == posterior.record
    torch.testing.assert_close(copy.network_outputs(grid), posterior.network_outputs(grid), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # quick fits
@pytest.mark.parametrize("method", [name for name in METHODS.names() if METHODS.get(name).cpu_only is None])
def test_every_method_fits_on_a_gpu_and_returns_its_posterior_on_the_cpu(method, rows):
    posterior = fit(BayesianMLP(1, 1, hidden=(4,)), rows, method, seed=0, progress=False, device="cuda",
                    **QUICK[method])
    on_cpu = fit(BayesianMLP(1, 1, hidden=(4,)), rows, method, seed=0, progress=False, **QUICK[method])
    assert posterior.record.device == "cuda" and posterior.samples.keys() == on_cpu.samples.keys()
    assert all(value.device.type == "cpu" for value in (*posterior.samples.values(), posterior.x, posterior.y))
    assert torch.isfinite(posterior.network_outputs(torch.linspace(-1, 1, 5).unsqueeze(-1))).all()
