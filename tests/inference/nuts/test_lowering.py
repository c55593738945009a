"""A torch module's network lowered to the compiled kernels: the same potential as torch's, the same draws as the
built-in network's; a module that is not lowered says why and samples on torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bnn.inference import fit
from bnn.inference.nuts import potential as potential_module
from bnn.inference.nuts.lowering import chain_inputs, lowered_chain
from bnn.inference.nuts.numba_potential import kernel_gap
from bnn.inference.nuts.potential import Backend, FlatPotential
from bnn.models import BayesianMLP, from_module
from torch import nn

from tests.conftest import default_dtype
from tests.inference.test_exactness import check_nuts
from tests.support.conjugate import NUM_FEATURES, conjugate_problem

pytestmark = pytest.mark.usefixtures("float64")


class Features(nn.Module):
    """A feature map of its own around a last ``nn.Linear``: lowered when that layer alone is Bayesian."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(2, 4)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(torch.sin(self.body(x)) + x.sum(-1, keepdim=True))


class Affine(nn.Module):
    """:math:`f(x) = x w^\\top + b` with parameters of its own (no ``nn.Linear``): not lowered."""

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, in_features))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return x @ self.weight.T + self.bias


def held(model):
    """``model`` with its point parameters (if any) at the module's own values, as ``fit`` would set them at the MAP."""
    return model.with_point_values(dict(model.module.named_parameters())) if model.needs_point_fit() else model


def data(n: int = 12):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(n, 2, generator=generator), torch.randn(n, generator=generator)


LOWERED = {
    "tanh": lambda: from_module(nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 1))),
    "relu, dropout, deep": lambda: from_module(nn.Sequential(nn.Linear(2, 5), nn.ReLU(), nn.Dropout(0.2), nn.Linear(5, 3),
                                                             nn.ReLU(), nn.Linear(3, 1)), likelihood={"name": "gaussian",
                                                                                                      "scale": None}),
    "elu": lambda: from_module(nn.Sequential(nn.Linear(2, 5), nn.ELU(), nn.Linear(5, 1)), prior="laplace"),
    "a linear layer": lambda: from_module(nn.Linear(2, 1)),
    "last layer of a sequential": lambda: from_module(nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3),
                                                                    nn.Tanh(), nn.Linear(3, 1)), bayesian="last-layer"),
    "last two layers": lambda: from_module(nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3), nn.SiLU(),
                                                         nn.Linear(3, 1)), bayesian=["2", "4"]),
    "last layer over features of its own": lambda: from_module(Features(), bayesian="last-layer"),
}


@pytest.mark.parametrize("backend", [Backend.NUMBA, Backend.NUMPY])
@pytest.mark.parametrize("name", sorted(LOWERED))
def test_a_lowered_module_has_the_torch_potentials_value_and_gradient(name, backend):
    torch.manual_seed(0)
    model = held(LOWERED[name]())
    x, y = data()
    assert kernel_gap(model) is None
    lowered, eager = FlatPotential(model, x, y, backend=backend), FlatPotential(model, x, y, backend=Backend.EAGER)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        z = torch.randn(lowered.dim, generator=generator).numpy()
        value, gradient = lowered.value_and_grad(z)
        expected_value, expected_gradient = eager.value_and_grad(z)
        assert value == pytest.approx(expected_value, rel=1e-10)
        np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-9, atol=1e-9)
    assert FlatPotential(model, x, y).backend is Backend.NUMBA


def test_the_chain_of_a_last_layer_reads_the_fixed_features_computed_once():
    torch.manual_seed(0)
    model = held(from_module(nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 1)), bayesian="last-layer"))
    x, _ = data()
    chain, first = lowered_chain(model)
    assert first == "2" and [site.name for layer in chain.layers for site in layer] == ["2.weight", "2.bias"]
    with torch.no_grad():
        torch.testing.assert_close(chain_inputs(model, x), model.module[:2].double()(x))


class Doubled(nn.Module):
    """Its Bayesian ``nn.Linear`` does not make the output: twice it does."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)

    def forward(self, x):
        return 2.0 * self.layer(x)


NOT_LOWERED = {
    "a convolution": (lambda: from_module(nn.Sequential(nn.Unflatten(1, (1, 2)), nn.Conv1d(1, 2, 2), nn.Flatten(),
                                                        nn.Linear(2, 1)), in_features=2),
                      "its Bayesian parameters of '1' are not the weight and bias of an nn.Linear (a Conv1d)"),
    "two activations": (lambda: from_module(nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 3), nn.ReLU(),
                                                          nn.Linear(3, 1))),
                        "its activations differ between layers (['relu', 'tanh'])"),
    "other settings": (lambda: from_module(nn.Sequential(nn.Linear(2, 3), nn.Softplus(beta=2.0), nn.Linear(3, 1))),
                       "its layer '1' (Softplus(beta=2.0, threshold=20.0)) is not an activation the kernels compile"),
    "an activation after the last layer": (lambda: from_module(nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1),
                                                                             nn.Sigmoid())),
                                           "its children from '0' on are not Bayesian nn.Linear layers ['0', '2']"),
    "a forward of its own": (lambda: from_module(Features()),
                             "its Bayesian nn.Linear layers ['body', 'head'] are not the tail of an nn.Sequential"),
    "an output of its own": (lambda: from_module(Doubled()), "nor one layer that makes the output"),
    "parameters of its own": (lambda: from_module(Affine(2), in_features=2),
                              "its Bayesian parameters of 'the module' are not the weight and bias of an nn.Linear"),
}


@pytest.mark.parametrize("name", sorted(NOT_LOWERED))
def test_a_module_that_is_not_lowered_says_why_and_runs_on_torch(name):
    make, reason = NOT_LOWERED[name]
    model = make()
    gap = kernel_gap(model)
    assert gap.startswith("the kernel is compiled for a chain of dense layers, which TorchModuleNetwork is not (")
    assert reason in gap
    assert FlatPotential(model, *data()).backend is Backend.TRACE


@pytest.mark.filterwarnings("ignore::bnn.inference.diagnostics.convergence.ConvergenceWarning")  # a short run
def test_a_lowered_module_draws_what_the_built_in_network_draws_at_the_same_seed():
    x, y = data(20)
    options = dict(num_warmup=30, num_samples=30, num_chains=1, init="prior", seed=3, progress=False)
    built_in = fit(BayesianMLP(2, 1, hidden=(4,)), (x, y), "nuts", **options)
    module = fit(from_module(nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))), (x, y), "nuts", **options)
    assert built_in.record.chain_backends == module.record.chain_backends == ["numba"]
    assert module.record.kernel_gap is None
    for name, value in built_in.samples.items():
        torch.testing.assert_close(module.samples[name.removeprefix("layers.").replace("1.", "2.")], value, rtol=0,
                                   atol=0)


def test_auto_compiles_the_torch_potential_when_the_run_pays_for_the_build(monkeypatch):
    """``compile`` is tried only when the expected gradients on ``trace`` would take longer than
    COMPILE_PAYS_OFF_SECONDS, and kept only when it is faster (here a stand-in build and stand-in timings: trace's,
    then compile's, to keep the build out of a unit test)."""
    model, (x, y) = from_module(Affine(2), in_features=2), data()
    built = []

    def compiled(function):
        built.append(function)
        return potential_module.torch_evaluator(function)

    monkeypatch.setattr(potential_module, "compiled_evaluator", compiled)
    for trace_seconds, compile_seconds, gradients, backend in [(1e-3, 1e-4, 10_000, Backend.TRACE),
                                                                (1e-3, 1e-4, 10**6, Backend.COMPILE),
                                                                (1e-3, 2e-3, 10**6, Backend.TRACE)]:
        times = iter([trace_seconds, compile_seconds])
        monkeypatch.setattr(potential_module, "median_seconds", lambda call, times=times: next(times))
        built.clear()
        assert FlatPotential(model, x, y, gradients=gradients).backend is backend
        assert len(built) == (gradients * trace_seconds > potential_module.COMPILE_PAYS_OFF_SECONDS)
    assert FlatPotential(model, x, y).backend is Backend.TRACE  # no count: never


@pytest.mark.long
def test_a_module_that_is_not_lowered_samples_the_exact_posterior_on_the_compiled_torch_potential():
    """The conjugate regression of ``tests/inference/test_exactness.py`` on a module of its own (not lowered): NUTS's
    run of 2 x 1,300 draws pays for ``torch.compile``'s build, and its draws match the exact posterior."""
    with default_dtype(torch.float64):
        problem = conjugate_problem(model=from_module(Affine(NUM_FEATURES), in_features=NUM_FEATURES))
    posterior = fit(problem.model, (problem.x, problem.y), "nuts", num_warmup=300, num_samples=1000, num_chains=2,
                    chain_method="sequential", seed=1, progress=False)
    assert posterior.record.chain_backends == ["compile", "compile"]
    check_nuts(problem, posterior)
