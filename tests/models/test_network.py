"""The model interface, :class:`bnn.models.network.BayesianNetwork`: a network written on it in a few lines is fitted
by every method that takes any network, refused before any work by the one that needs to know where its dropout goes,
and
saved, loaded and given priors like the collection's own networks."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from bnn.datasets import Dataset
from bnn.inference import METHODS, Posterior, fit
from bnn.inference.evaluation.compare import label_fits
from bnn.inference.nuts.potential import Backend, FlatPotential
from bnn.models import ARCHITECTURES, BayesianMLP, BayesianNetwork, GaussianPrior, LaplacePrior, WeightSite
from bnn.models.network import network_from_config

from bnn.experiments.comparison.report import write_comparison
from tests.support.quick_options import QUICK, SECONDS, any_network_list, any_network_methods


@ARCHITECTURES.register("test-skip")
class SkipNet(BayesianNetwork):
    r"""A tanh hidden layer beside a linear skip connection: :math:`f(x) = x\,v^\top + \tanh(x W^\top + b)\,u^\top + c`."""

    def __init__(self, in_features: int, hidden: int = 4, *, prior="gaussian", likelihood="gaussian") -> None:
        self.hidden = hidden
        sites = (WeightSite("hidden.weight", 0, torch.Size((hidden, in_features)), in_features),
                 WeightSite("hidden.bias", 0, torch.Size((hidden,)), in_features),
                 WeightSite("skip.weight", 1, torch.Size((1, in_features)), in_features),
                 WeightSite("out.weight", 1, torch.Size((1, hidden)), hidden),
                 WeightSite("out.bias", 1, torch.Size((1,)), hidden))
        super().__init__(in_features, 1, sites, prior=prior, likelihood=likelihood)

    def forward(self, x: torch.Tensor, w) -> torch.Tensor:
        h = torch.tanh(x @ w["hidden.weight"].transpose(-1, -2) + w["hidden.bias"].unsqueeze(-2))
        return x @ w["skip.weight"].transpose(-1, -2) + h @ w["out.weight"].transpose(-1, -2) + w["out.bias"].unsqueeze(-2)

    def arguments(self) -> dict[str, Any]:
        return {"in_features": self.in_features, "hidden": self.hidden}


X = torch.linspace(-2, 2, 24).reshape(-1, 1)
Y = (0.5 * X + torch.sin(2 * X)).reshape(-1) + 0.1 * torch.randn(24, generator=torch.Generator().manual_seed(0))


def skip_net(**kwargs) -> SkipNet:
    return SkipNet(1, likelihood={"name": "gaussian", "scale": 0.1}, **kwargs)


@pytest.mark.parametrize("method", [pytest.param(name, marks=pytest.mark.long) if name in SECONDS else name
                                    for name in any_network_methods()])
def test_every_method_that_takes_any_network_fits_one_written_here(method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps cannot converge; the checks of each method are tested elsewhere
        posterior = fit(skip_net(), (X, Y), method, seed=0, progress=False, **QUICK[method])
    assert set(posterior.samples) == {site.name for site in posterior.model.sites}
    # the draws the method's cost model says its posterior holds, which the report's estimate counts
    parsed = METHODS.get(method).parse(QUICK[method], posterior.model)
    assert METHODS.get(method).cost.draws(parsed) == posterior.num_chains * posterior.num_draws
    prediction = posterior.predict(X, seed=0)
    assert prediction.mean.shape == (24,) and torch.isfinite(prediction.mean).all()
    assert torch.isfinite(posterior.pointwise_log_likelihood(X, Y)).all()


def test_mc_dropout_refuses_a_network_that_does_not_say_where_its_dropout_goes_before_any_work(monkeypatch):
    monkeypatch.setattr("bnn.inference.core.method.check_memory", lambda *args: pytest.fail("work started"))
    assert skip_net().dropped_inputs() is None  # the default of a network that is not a chain of dense layers
    with pytest.raises(ValueError, match=r"method 'mc-dropout' needs a network that says where its dropout goes "
                                         r"\(model.dropped_inputs\(\) is not None.* which SkipNet is not; "
                                         rf"use {any_network_list()}"):
        fit(skip_net(), (X, Y), "mc-dropout")


def test_nuts_evaluates_a_network_written_here_through_its_torch_potential():
    """The compiled kernels need a chain of dense layers; the potential falls back to torch and agrees with Pyro's."""
    potential = FlatPotential(skip_net(), X, Y)
    assert potential.backend in (Backend.TRACE, Backend.EAGER)


def test_the_mean_field_guide_leaves_out_local_reparameterisation_for_it_and_refuses_it_when_asked():
    from bnn.guides import MeanFieldGuide

    assert not MeanFieldGuide(skip_net()).local_reparameterisation
    with pytest.raises(ValueError, match="local reparameterisation draws the outputs of layers written with "
                                         r"bnn.models.layers.linear/conv; SkipNet's 'hidden.weight' is not"):
        MeanFieldGuide(skip_net(), local_reparameterisation=True)


@pytest.mark.long
def test_a_fit_of_it_saves_loads_compares_and_becomes_the_next_prior(tmp_path):
    posterior = fit(skip_net(hidden=3), (X, Y), "laplace", seed=0, progress=False, **QUICK["laplace"])
    posterior.save(tmp_path / "run")
    loaded = Posterior.load(tmp_path / "run")
    assert isinstance(loaded.model, SkipNet) and loaded.model.hidden == 3
    assert loaded.model.config() == posterior.model.config() and loaded.model.config()["architecture"] == "test-skip"
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, posterior.predict(X, seed=0).mean)
    prior = posterior.as_prior()
    assert set(prior.loc) == {site.name for site in posterior.model.sites}
    next_task = skip_net(hidden=3)
    next_task.prior = prior
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 30 steps: the ELBO is still rising
        next_fit = fit(next_task, (X, Y), "svi", seed=0, progress=False, **QUICK["svi"])
    data = Dataset.from_arrays("skip", "regression", X.numpy(), Y.numpy(), X.numpy(), Y.numpy())
    table = write_comparison(label_fits([posterior, next_fit]), data, tmp_path / "report", command="test", progress=False)
    assert list(table.index) == ["laplace", "svi (meanfield)"] and (tmp_path / "report" / "report.md").is_file()


def test_priors_are_chosen_per_site_and_per_layer_on_it():
    model = SkipNet(1, prior={"*": "gaussian", "hidden": LaplacePrior(0.5), "out.bias": GaussianPrior(3.0)})
    assert isinstance(model.prior["hidden.weight"], LaplacePrior) and isinstance(model.prior["hidden.bias"], LaplacePrior)
    assert model.prior["out.bias"].scale == 3.0 and model.prior["skip.weight"].scale == 1.0
    with pytest.raises(ValueError, match=r"prior keys \['layers.0'\] match no site; use '\*', a layer \['hidden', 'out', "
                                         r"'skip'\] or a site"):
        model.prior = {"layers.0": "gaussian", "*": "gaussian"}


def test_what_the_interface_derives_from_the_sites():
    model = SkipNet(2, hidden=5, likelihood={"name": "gaussian", "scale": None})  # a learned noise: one more latent
    assert [site.name for site in model.output_sites()] == ["skip.weight", "out.weight", "out.bias"]
    assert model.activation_widths() == (2, 5, 1, 1)  # the inputs, then each site's leading dimension of 2+ dims
    assert model.dense_layers() is None and not model.has_kinks()  # not a chain: taken as smooth
    assert model.latent_shapes == {"hidden.weight": (5, 2), "hidden.bias": (5,), "skip.weight": (1, 2), "out.weight": (1, 5),
                                   "out.bias": (1,), "sigma": ()}
    assert repr(model) == "SkipNet(in_features=2, hidden=5, prior={*: GaussianPrior}, likelihood=GaussianLikelihood)"
    assert model.likelihood.latent_priors() and not SkipNet(2).likelihood.latent_priors()  # the default noise is fixed


def test_the_mlp_states_its_chain_and_a_subclass_that_rewrites_forward_does_not():
    mlp = BayesianMLP(3, 2, hidden=(4,), activation="relu")
    chain = mlp.dense_layers()
    assert chain.activation == "relu" and [(w.name, b.name) for w, b in chain.layers] == [
        ("layers.0.weight", "layers.0.bias"), ("layers.1.weight", "layers.1.bias")]
    assert mlp.activation_widths() == (3, 4, 2) and mlp.output_sites() == mlp.sites[2:]
    assert mlp.has_kinks() and not BayesianMLP(3, 2, hidden=(4,)).has_kinks()  # ReLU, and the default tanh

    class Shifted(BayesianMLP):
        def forward(self, x, weights):
            return super().forward(x, weights) + 1.0

    assert Shifted(3, 2, hidden=(4,)).dense_layers() is None


def test_configs_name_their_architecture_and_rebuild_it():
    model = SkipNet(2, hidden=3, prior=LaplacePrior(0.5), likelihood={"name": "gaussian", "scale": 0.2})
    config = model.config()
    assert config == {"architecture": "test-skip", "in_features": 2, "hidden": 3,
                      "prior": {"*": {"name": "laplace", "scale": 0.5}},
                      "likelihood": {"name": "gaussian", "scale": 0.2, "noise_prior_scale": 1.0}}
    rebuilt = network_from_config(config)
    assert isinstance(rebuilt, SkipNet) and rebuilt.config() == config
    assert isinstance(BayesianMLP.from_config(config), SkipNet)  # a config names its class, whoever reads it
    assert BayesianMLP.from_config({k: v for k, v in BayesianMLP(1).config().items() if k != "architecture"}).hidden == (50,)


def test_a_network_that_is_not_registered_says_how_to_save_it():
    class Unregistered(SkipNet):
        pass

    with pytest.raises(ValueError, match=r"Unregistered is not registered as an architecture, so it cannot be saved by "
                                         r"name; register it with @ARCHITECTURES.register"):
        Unregistered(1).config()


@pytest.mark.parametrize("bad, message", [
    ((0, 1, ()), "in_features must be a positive integer, got 0"),
    ((1, 1, ()), r"a network needs one WeightSite or more"),
    ((1, 1, (WeightSite("a", 0, torch.Size((1,)), 1), WeightSite("a", 0, torch.Size((1,)), 1))), r"site names must be "
                                                                                                    r"unique, got \['a', 'a'\]"),
])
def test_bad_networks_are_refused_when_built(bad, message):
    class Constant(BayesianNetwork):
        def forward(self, x, weights):
            return weights["a"].unsqueeze(-2).expand(*weights["a"].shape[:-1], x.shape[0], 1)

        def arguments(self):
            return {}

    with pytest.raises(ValueError, match=message):
        Constant(*bad)


def test_fit_refuses_what_is_not_a_network_saying_how_to_write_one():
    with pytest.raises(TypeError, match=r"model must be a BayesianNetwork \(bnn.models\), got function: use BayesianMLP"
                                        r".* or write your own network by subclassing bnn.models.BayesianNetwork"):
        fit(lambda x, y: None, (X, Y), "svi")
