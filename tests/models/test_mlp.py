"""The model is a plain Pyro program: site names, shapes, vectorisation, Pyro's own tools."""

from __future__ import annotations

import pyro
import pytest
import torch
from bnn.models import BayesianMLP, GaussianPrior, LaplacePrior, ScaleMixturePrior
from pyro import poutine
from pyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoLowRankMultivariateNormal
from pyro.poutine.util import site_is_subsample


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(30, 3, generator=generator)
    return x, torch.sin(x.sum(-1))


def sample_sites(trace):
    return {name: node for name, node in trace.nodes.items() if node["type"] == "sample" and not site_is_subsample(node)}


def test_site_names_and_shapes_are_stable(data):
    x, y = data
    model = BayesianMLP(3, 1, hidden=(5, 4), likelihood={"name": "gaussian", "scale": None})
    shapes = {name: tuple(node["value"].shape) for name, node in sample_sites(poutine.trace(model).get_trace(x, y)).items()}
    assert shapes == {
        "layers.0.weight": (5, 3), "layers.0.bias": (5,),
        "layers.1.weight": (4, 5), "layers.1.bias": (4,),
        "layers.2.weight": (1, 4), "layers.2.bias": (1,),
        "sigma": (), "obs": (30,),
    }


def test_forward_is_the_mlp_of_the_docstring(data):
    x, _ = data
    model = BayesianMLP(3, 2, hidden=(4,), activation="relu")
    weights = {site.name: torch.randn(site.shape) for site in model.sites}
    hidden = torch.relu(x @ weights["layers.0.weight"].T + weights["layers.0.bias"])
    expected = hidden @ weights["layers.1.weight"].T + weights["layers.1.bias"]
    torch.testing.assert_close(model.forward(x, weights), expected)


def test_forward_broadcasts_over_sample_dims_and_the_plate_slot(data):
    x, _ = data
    model = BayesianMLP(3, 1, hidden=(4,))
    draws = {site.name: torch.randn(6, *site.shape) for site in model.sites}
    batched = model.forward(x, draws)
    plate_shaped = model.forward(x, model.squeeze_plate_slot({k: v.unsqueeze(1) for k, v in draws.items()}))
    looped = torch.stack([model.forward(x, {k: v[s] for k, v in draws.items()}) for s in range(6)])
    assert batched.shape == (6, 30, 1)
    torch.testing.assert_close(batched, looped)
    torch.testing.assert_close(plate_shaped, looped)


def test_log_joint_is_prior_plus_likelihood(data):
    x, y = data
    model = BayesianMLP(3, 1, hidden=(4,), prior=LaplacePrior(0.7), likelihood={"name": "gaussian", "scale": 0.2})
    trace = poutine.trace(model).get_trace(x, y)
    values = {site.name: trace.nodes[site.name]["value"] for site in model.sites}
    prior = sum(torch.distributions.Laplace(0.0, 0.7).log_prob(v).sum() for v in values.values())
    likelihood = torch.distributions.Normal(model.forward(x, values)[:, 0], 0.2).log_prob(y).sum()
    torch.testing.assert_close(trace.log_prob_sum(), prior + likelihood)


def test_minibatch_likelihood_is_rescaled_to_the_full_data(data):
    x, y = data
    model = BayesianMLP(3, 1, hidden=(4,))
    trace = poutine.trace(model).get_trace(x[:10], y[:10], num_data=30)
    trace.compute_log_prob()
    assert trace.nodes["obs"]["scale"] == pytest.approx(3.0)


def test_forward_refuses_misshaped_weights(data):
    model = BayesianMLP(3, 1, hidden=(4,))
    weights = {site.name: torch.zeros(site.shape) for site in model.sites}
    weights["layers.1.weight"] = torch.zeros(4, 1)
    with pytest.raises(ValueError, match=r"layer 1 needs weight \(..., \(1, 4\)\)"):
        model.forward(data[0], weights)


def test_priors_swap_in_one_line_and_per_layer(data):
    model = BayesianMLP(3, 1, hidden=(4,))
    model.prior = {"*": GaussianPrior(0.5), "layers.1": ScaleMixturePrior(), "layers.0.bias": "laplace"}
    assert isinstance(model.prior["layers.0.weight"], GaussianPrior)
    assert isinstance(model.prior["layers.0.bias"], LaplacePrior)
    assert isinstance(model.prior["layers.1.weight"], ScaleMixturePrior)
    x, y = data
    trace = poutine.trace(model).get_trace(x, y)
    assert isinstance(trace.nodes["layers.1.bias"]["fn"].base_dist, ScaleMixturePrior().distribution(model.sites[3]).__class__)
    assert BayesianMLP.from_config(model.config()).config() == model.config()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prior={"layers.7": "gaussian", "*": "gaussian"}), r"prior keys \['layers.7'\] match no site"),
        (dict(prior={"layers.0": "gaussian"}), "no prior given for site 'layers.1.weight'"),
        (dict(hidden=(0,)), "hidden width must be a positive integer"),
        (dict(activation="swish"), "unknown activation 'swish'"),
        (dict(likelihood="bernoulli", out_features=2), "needs out_features=1"),
    ],
)
def test_bad_model_options_are_refused(kwargs, message):
    kwargs = {"out_features": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        BayesianMLP(3, kwargs.pop("out_features"), **kwargs)


@pytest.mark.long
def test_pyro_tools_work_on_the_model_directly(data):
    """Vectorised particles, Predictive(parallel=True), an autoguide the collection does not wrap, MCMC."""
    x, y = data
    model = BayesianMLP(3, 1, hidden=(4,), likelihood={"name": "gaussian", "scale": None})
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    guide = AutoLowRankMultivariateNormal(model, rank=2)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO(num_particles=8, vectorize_particles=True))
    losses = [svi.step(x, y) for _ in range(30)]
    assert all(torch.isfinite(torch.tensor(losses)))
    predictive = Predictive(model, guide=guide, num_samples=50, parallel=True)(x)
    assert predictive["obs"].shape == (50, 30)
    draws = {k: v for k, v in predictive.items() if k != "obs"}
    assert Predictive(model, posterior_samples=draws, parallel=True)(x)["obs"].shape == (50, 30)
    assert model.observation_distribution(x, model.squeeze_plate_slot(draws)).log_prob(y).shape == (50, 30)
    mcmc = MCMC(NUTS(model, max_tree_depth=3), num_samples=5, warmup_steps=5, disable_progbar=True)
    mcmc.run(x, y)
    assert mcmc.get_samples()["layers.0.weight"].shape == (5, 4, 3)
    pyro.clear_param_store()
