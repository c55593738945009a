"""The flat potential equals Pyro's trace-based potential, with the same gradient, for every part of the collection."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyro
import pyro.distributions as dist
import pytest
import torch
from bnn.inference.core.temperature import tempered
from bnn.inference.evaluation.cost import gradient_count
from bnn.inference.nuts import potential as potential_module
from bnn.inference.nuts.cost import potential_gradient_seconds
from bnn.inference.nuts.numba_potential import kernel_gap
from bnn.inference.nuts.numpy_potential import ACTIVATION_DERIVATIVES, Unsupported
from bnn.inference.nuts.options import NUTSOptions
from bnn.inference.nuts.potential import Backend, FlatPotential, flat_potential_mismatch
from bnn.models import LIKELIHOODS, PRIORS, BayesianMLP, GaussianPrior, Prior
from bnn.models.activations import ACTIVATIONS
from bnn.models.fast_forms import NormalForm
from pyro.infer.mcmc.util import initialize_model

from tests.support.prior_examples import HIERARCHICAL, example_prior

LIKELIHOOD_SPECS = {
    "gaussian": {"name": "gaussian", "scale": 0.3},
    "gaussian-learned-noise": {"name": "gaussian", "scale": None, "noise_prior_scale": 0.5},
    "bernoulli": "bernoulli",
    "categorical": "categorical",
    "heteroscedastic-gaussian": "heteroscedastic-gaussian",
}
OUT_FEATURES = {"categorical": 3, "heteroscedastic-gaussian": 2}  # a mean and a scale per input
NO_HAND_DERIVED_GRADIENT = {"heteroscedastic-gaussian"}


@dataclass(frozen=True)
class StudentTPrior(Prior):
    """A user-written prior, outside the registry."""

    df: float = 3.0

    def distribution(self, site):
        return dist.StudentT(self.df, 0.0, 0.7).expand(site.shape)


pytestmark = pytest.mark.usefixtures("float64")


def data_for(likelihood: str, out_features: int, n: int = 12, d: int = 2):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=generator)
    if "gaussian" in likelihood:
        return x, torch.randn(n, generator=generator)
    return x, torch.randint(0, max(out_features, 2), (n,), generator=generator).double()


def reference(model, x, y):
    """Pyro's potential U(z) on the model's trace (a dict of unconstrained site values)."""
    _, potential_fn, _, _ = initialize_model(model, (x, y), max_plate_nesting=1)
    return potential_fn


def check_against_pyro(model, x, y, backend=Backend.EAGER, points: int = 3):
    y = model.likelihood.check_targets(y, model.out_features)
    potential, pyro_potential = FlatPotential(model, x, y, backend=backend), reference(model, x, y)
    generator = torch.Generator().manual_seed(1)
    offsets = []
    for _ in range(points):
        z = torch.randn(potential.dim, generator=generator)
        value, gradient = potential.value_and_grad(z.numpy())
        point = z.clone().requires_grad_()
        u = pyro_potential(potential.unconstrained(point))
        (expected_gradient,) = torch.autograd.grad(-u, point)
        offsets.append(value + u.item())
        np.testing.assert_allclose(gradient, expected_gradient.numpy(), rtol=1e-9, atol=1e-9)
    # equal up to a constant (here the constant is 0: both keep every normalising term)
    np.testing.assert_allclose(offsets, offsets[0], atol=1e-8)
    assert abs(offsets[0]) < 1e-8
    return potential


@pytest.mark.parametrize("backend", [Backend.EAGER, Backend.NUMPY, Backend.NUMBA])
@pytest.mark.parametrize("hidden", [(), (3,), (4, 3)], ids=["glm", "hidden", "deep"])
@pytest.mark.parametrize("likelihood", sorted(LIKELIHOOD_SPECS))
@pytest.mark.parametrize("prior", PRIORS.names())
def test_equals_pyros_potential_for_every_prior_and_likelihood(prior, likelihood, hidden, backend):
    out_features = OUT_FEATURES.get(likelihood, 1)
    model = BayesianMLP(2, out_features, hidden=hidden, likelihood=LIKELIHOOD_SPECS[likelihood])
    model.prior = example_prior(prior, model.sites)
    if backend is not Backend.EAGER and prior in HIERARCHICAL:  # the compiled kernels serve fixed priors
        with pytest.raises(Unsupported):
            check_against_pyro(model, *data_for(likelihood, out_features), backend=backend)
        return
    if backend is Backend.NUMPY and likelihood in NO_HAND_DERIVED_GRADIENT:
        with pytest.raises(Unsupported, match="states no fast form with a hand-derived gradient"):
            check_against_pyro(model, *data_for(likelihood, out_features), backend=backend)
        return
    assert check_against_pyro(model, *data_for(likelihood, out_features), backend=backend).backend is backend


@pytest.mark.parametrize("activation", sorted(ACTIVATION_DERIVATIVES))
def test_hand_derived_gradient_for_every_activation_it_covers(activation):
    model = BayesianMLP(2, 1, hidden=(4, 3), activation=activation, prior={"*": "gaussian", "layers.1": "scale-mixture"},
                        likelihood={"name": "gaussian", "scale": None})
    check_against_pyro(model, *data_for("gaussian", 1), backend=Backend.NUMPY)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS.names()))
def test_compiled_kernel_for_every_activation(activation):
    model = BayesianMLP(2, 1, hidden=(4, 3), activation=activation, prior={"*": "gaussian", "layers.1": "scale-mixture"},
                        likelihood={"name": "gaussian", "scale": None})
    check_against_pyro(model, *data_for("gaussian", 1), backend=Backend.NUMBA)


def test_auto_prefers_the_compiled_kernel_and_says_why_it_cannot():
    data = data_for("gaussian", 1)
    assert FlatPotential(BayesianMLP(2, 1, hidden=(3,)), *data).backend is Backend.NUMBA
    student_t = BayesianMLP(2, 1, hidden=(3,), prior={"*": "gaussian", "layers.1.weight": StudentTPrior()})
    with pytest.raises(Unsupported, match=re.escape("prior StudentTPrior of site 'layers.1.weight' states no fast form")):
        FlatPotential(student_t, *data, backend="numba")
    uncovered = set(ACTIVATIONS.names()) - set(ACTIVATION_DERIVATIVES)
    for model, part in [
        (student_t, "prior StudentTPrior of site 'layers.1.weight'"),
        *[(BayesianMLP(2, 1, hidden=(3,), activation=name), f"activation '{name}'") for name in sorted(uncovered)],
    ]:
        with pytest.raises(Unsupported, match=re.escape(part)):
            FlatPotential(model, *data, backend="numpy")
    assert check_against_pyro(student_t, *data, backend="auto").backend is Backend.TRACE


@dataclass(frozen=True)
class ShiftedNormalPrior(Prior):
    """A user-written prior that states its fast form next to its torch form: N(0.3, 0.5^2) on every weight."""

    def distribution(self, site):
        return dist.Normal(0.3, 0.5).expand(site.shape)

    def fast_form(self, site):
        return NormalForm(torch.full(site.shape, 0.3), torch.full(site.shape, 0.5))


@dataclass(frozen=True)
class WiderGaussianPrior(GaussianPrior):
    """A subclass of a built-in prior that changes its density and states no form of its own."""

    def distribution(self, site):
        return dist.Normal(0.0, 2.0 * self.site_scale(site)).expand(site.shape)


def test_a_prior_that_states_its_fast_form_gets_the_compiled_kernel_and_one_that_changes_a_density_does_not():
    data = data_for("gaussian", 1)
    shifted = BayesianMLP(2, 1, hidden=(3,), prior={"*": "gaussian", "layers.0.weight": ShiftedNormalPrior()})
    assert check_against_pyro(shifted, *data, backend="auto").backend is Backend.NUMBA
    wider = BayesianMLP(2, 1, hidden=(3,), prior=WiderGaussianPrior())
    assert wider.prior["layers.0.weight"].fast_form(wider.sites[0]) is None
    assert kernel_gap(wider) == "prior WiderGaussianPrior of site 'layers.0.weight' states no fast form (Prior.fast_form)"
    assert check_against_pyro(wider, *data, backend="auto").backend is Backend.TRACE


def test_nuts_says_with_its_cost_estimate_and_its_record_that_it_runs_on_the_torch_potential():
    data = data_for("gaussian", 1)
    student_t = BayesianMLP(2, 1, hidden=(3,), prior={"*": "gaussian", "layers.1.weight": StudentTPrior()})
    options = NUTSOptions(num_warmup=5, num_samples=5, num_chains=1)
    said = gradient_count("nuts", options, data[0].shape[0], student_t).how
    assert ("on the torch potential, since the compiled kernel does not apply: prior StudentTPrior of site "
            "'layers.1.weight' states no fast form") in said
    assert "torch potential" not in gradient_count("nuts", options, data[0].shape[0], BayesianMLP(2, 1, hidden=(3,))).how
    assert kernel_gap(BayesianMLP(2, 1, hidden=(3,)), temperature=2.0) == ("the kernel evaluates the untempered "
                                                                          "potential, not temperature 2")


def test_the_collection_is_covered():
    assert {spec if isinstance(spec, str) else spec["name"] for spec in LIKELIHOOD_SPECS.values()} == set(LIKELIHOODS)


def test_user_written_and_per_layer_priors():
    model = BayesianMLP(2, 1, hidden=(4,), prior={"*": StudentTPrior(), "layers.1": "laplace"},
                        likelihood={"name": "gaussian", "scale": None})
    check_against_pyro(model, *data_for("gaussian", 1))


def test_learned_noise_maps_back_through_exp():
    model = BayesianMLP(2, 1, hidden=(), likelihood={"name": "gaussian", "scale": None})
    potential = FlatPotential(model, *data_for("gaussian", 1), backend="eager")
    z = torch.tensor([0.1, 0.2, 0.3, np.log(0.25)])
    values = potential.constrained(z)
    assert potential.names == ["layers.0.weight", "layers.0.bias", "sigma"]
    torch.testing.assert_close(values["sigma"], torch.tensor(0.25))
    assert values["layers.0.weight"].shape == (1, 2)
    torch.testing.assert_close(potential.flatten(potential.unconstrained(z)), z)


@pytest.mark.long
@pytest.mark.parametrize("backend", [Backend.TRACE, Backend.COMPILE])
def test_compiled_backends_equal_pyros_potential(backend):
    model = BayesianMLP(2, 1, hidden=(3,), prior="scale-mixture", likelihood={"name": "gaussian", "scale": None})
    potential = check_against_pyro(model, *data_for("gaussian", 1), backend=backend)
    assert potential.backend is backend


def test_auto_falls_back_when_compilation_fails(monkeypatch):
    model = BayesianMLP(2, 1, hidden=(3,))
    data = data_for("gaussian", 1)

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(potential_module, "NumbaLogDensity", broken)
    assert FlatPotential(model, *data, backend="auto").backend is Backend.NUMPY
    monkeypatch.setattr(potential_module, "NumpyLogDensity", broken)
    assert FlatPotential(model, *data, backend="auto").backend is Backend.TRACE
    monkeypatch.setattr(torch.jit, "trace", broken)
    potential = check_against_pyro(model, *data, backend="auto")
    assert potential.backend is Backend.EAGER
    with pytest.raises(RuntimeError, match="no compiler here"):
        FlatPotential(model, *data, backend="trace")  # an explicit choice is not replaced


def test_unknown_backend_is_refused():
    choices = r"\['auto', 'numba', 'numpy', 'compile', 'trace', 'eager'\]"
    with pytest.raises(ValueError, match=r"unknown backend 'jax'; choose from " + choices):
        FlatPotential(BayesianMLP(2, 1), *data_for("gaussian", 1), backend="jax")


class WiderNoise(BayesianMLP):
    """The model's sites, but a likelihood the model object does not describe (twice its noise scale)."""

    def __call__(self, x, y=None, num_data=None):
        values = {site.name: pyro.sample(site.name, self.prior[site.name].distribution(site).to_event(len(site.shape)))
                  for site in self.sites}
        f = self.forward(x, self.squeeze_plate_slot(values))[..., 0]
        with pyro.plate("data", x.shape[0]):
            return pyro.sample("obs", dist.Normal(f, 2 * self.likelihood.scale), obs=y)


class ExtraSite(BayesianMLP):
    """A site of its own, outside the model's description."""

    def __call__(self, x, y=None, num_data=None):
        pyro.sample("extra", dist.Normal(0.0, 1.0))
        return super().__call__(x, y, num_data)


@dataclass(frozen=True)
class PositiveWeights(Prior):
    """A prior on positive weights: the flat potential would leave them unconstrained."""

    def distribution(self, site):
        return dist.HalfNormal(1.0).expand(site.shape)


@pytest.mark.parametrize("prior", PRIORS.names())
@pytest.mark.parametrize("likelihood", sorted(LIKELIHOOD_SPECS))
def test_the_collections_models_match_their_programs(prior, likelihood):
    out_features = OUT_FEATURES.get(likelihood, 1)
    model = BayesianMLP(2, out_features, hidden=(3,), likelihood=LIKELIHOOD_SPECS[likelihood])
    model.prior = example_prior(prior, model.sites)
    x, y = data_for(likelihood, out_features)
    assert flat_potential_mismatch(model, x, model.likelihood.check_targets(y, out_features)) is None


@pytest.mark.parametrize("model, reason", [
    (ExtraSite(2, 1, hidden=(3,)), r"latent sites .*'extra'"),
    (WiderNoise(2, 1, hidden=(3,), likelihood={"name": "gaussian", "scale": 0.3}), "not by a constant"),
    (BayesianMLP(2, 1, hidden=(3,), prior=PositiveWeights()), "site 'layers.0.weight' has support"),
], ids=["extra site", "other likelihood", "constrained weights"])
def test_a_program_the_model_does_not_describe_is_detected(model, reason):
    assert re.search(reason, flat_potential_mismatch(model, *data_for("gaussian", 1)))


@pytest.mark.parametrize("likelihood", ["gaussian-learned-noise", "categorical"])
def test_a_tempered_potential_equals_pyros_on_the_tempered_program(likelihood):
    """At temperature T the flat potential is Pyro's of the program whose likelihood site is scaled by 1/T
    (:mod:`bnn.inference.core.temperature`), and ``auto`` leaves the untempered compiled kernels out, saying why."""
    out_features = OUT_FEATURES.get(likelihood, 1)
    model = BayesianMLP(2, out_features, hidden=(3,), likelihood=LIKELIHOOD_SPECS[likelihood])
    x, y = data_for(likelihood, out_features)
    y = model.likelihood.check_targets(y, model.out_features)
    potential = FlatPotential(model, x, y, temperature=0.25)
    assert potential.backend is Backend.TRACE
    with pytest.raises(Unsupported, match="untempered potential, not temperature 0.25"):
        FlatPotential(model, x, y, backend="numba", temperature=0.25)
    pyro_potential, untempered = reference(tempered(model, 0.25), x, y), reference(model, x, y)
    z = torch.randn(potential.dim, generator=torch.Generator().manual_seed(1))
    value, gradient = potential.value_and_grad(z.numpy())
    point = z.clone().requires_grad_()
    u = pyro_potential(potential.unconstrained(point))
    (expected_gradient,) = torch.autograd.grad(-u, point)
    assert value == pytest.approx(-u.item(), abs=1e-8)
    np.testing.assert_allclose(gradient, expected_gradient.numpy(), rtol=1e-9, atol=1e-9)
    assert abs(value + untempered(potential.unconstrained(z)).item()) > 1.0  # the temperature changed the potential


def test_the_cost_model_times_the_potential_the_run_will_evaluate(monkeypatch):
    """NUTS's cost estimate times the flat potential at the options' temperature (a tempered one runs on a torch
    backend, many times slower per gradient than the compiled kernel)."""
    built = []
    original = FlatPotential.__init__

    def recording(self, *args, **kwargs):
        built.append(kwargs.get("temperature"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(FlatPotential, "__init__", recording)
    model, (x, y) = BayesianMLP(2, 1, hidden=(3,)), data_for("gaussian", 1)
    for options in (NUTSOptions(), NUTSOptions(temperature=0.5)):
        assert potential_gradient_seconds(model, x, y, options) > 0
    assert built == [1.0, 0.5]
