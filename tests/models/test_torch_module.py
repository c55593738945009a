"""Any torch module made Bayesian (:func:`bnn.models.from_module`): its sites, a forward and log joint equal to the
collection's MLP at the same weights, partly Bayesian networks fitted at the MAP first, every method, save/load, and
each refusal. Its conjugate exactness (a ``nn.Linear`` against the closed-form posterior, Laplace, MAP, NUTS and SVI)
runs with the other networks' in ``tests/inference/test_exactness.py``."""

from __future__ import annotations

import json
import warnings

import pyro
import pytest
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference import Posterior, fit
from bnn.inference.curvature.output_curvature import output_jacobian
from bnn.inference.point_estimate import fit_map
from bnn.models import BayesianMLP, GaussianPrior, TorchModuleNetwork, from_module
from bnn.models.network import network_from_config
from torch import nn

from tests.conftest import default_dtype
from tests.models.test_network import X, Y
from tests.support.quick_options import QUICK, SECONDS, any_network_methods

LIKELIHOOD = {"name": "gaussian", "scale": 0.1}


def tanh_net(in_features: int = 1, hidden: int = 4, out_features: int = 1, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(in_features, hidden), nn.Tanh(), nn.Linear(hidden, out_features))


class Regressor(nn.Module):
    """A module of its own class (not a Sequential): a tanh feature layer and a head, named as a user would."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(1, 3), nn.Tanh())
        self.head = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def as_mlp_weights(values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A ``Sequential(Linear, Tanh, Linear)``'s weights under the MLP's site names."""
    rename = {"0.weight": "layers.0.weight", "0.bias": "layers.0.bias", "2.weight": "layers.1.weight",
              "2.bias": "layers.1.bias"}
    return {rename[name]: value for name, value in values.items()}


def test_sites_are_the_parameters_in_module_order():
    model = from_module(Regressor())
    assert [(s.name, s.layer, s.group, tuple(s.shape), s.fan_in) for s in model.sites] == [
        ("features.0.weight", 0, "features.0", (3, 1), 1), ("features.0.bias", 0, "features.0", (3,), 1),
        ("head.weight", 1, "head", (1, 3), 3), ("head.bias", 1, "head", (1,), 3)]
    assert (model.in_features, model.out_features) == (1, 1)  # the first Linear's inputs, a probe's outputs
    assert [site.name for site in model.output_sites()] == ["head.weight", "head.bias"]
    assert model.dense_layers() is None and model.held_fixed() == []
    model.prior = {"*": "gaussian", "features.0": GaussianPrior(3.0)}  # a layer is a submodule path
    assert model.prior["features.0.bias"].scale == 3.0 and model.prior["head.bias"].scale == 1.0


def test_forward_and_log_joint_equal_the_mlp_at_the_same_weights():
    mlp = BayesianMLP(2, 3, hidden=(5,), likelihood=LIKELIHOOD)
    model = from_module(tanh_net(2, 5, 3), likelihood=LIKELIHOOD)
    x = torch.randn(7, 2, generator=torch.Generator().manual_seed(1))
    y = torch.randn(7, 3, generator=torch.Generator().manual_seed(2))
    draws = {site.name: torch.randn(4, 2, *site.shape, generator=torch.Generator().manual_seed(i))
             for i, site in enumerate(model.sites)}  # two leading sample dimensions
    output = model.forward(x, draws)
    assert output.shape == (4, 2, 7, 3)
    torch.testing.assert_close(output, mlp.forward(x, as_mlp_weights(draws)), rtol=1e-6, atol=1e-6)
    one = {name: value[0, 0] for name, value in draws.items()}
    torch.testing.assert_close(model.forward(x, one), mlp.forward(x, as_mlp_weights(one)), rtol=1e-6, atol=1e-6)

    def log_joint(network, values):
        conditioned = pyro.poutine.condition(network, data=values)
        return pyro.poutine.trace(conditioned).get_trace(x, y).log_prob_sum()

    torch.testing.assert_close(log_joint(model, one), log_joint(mlp, as_mlp_weights(one)))


def test_vectorised_particles_and_the_laplace_jacobians_run_through_it():
    """Pyro's parallel predictive draws the same weights in the same order as the MLP's, and the per-row Jacobians of
    Laplace (``torch.func.jacrev`` under ``vmap``) are the MLP's."""
    mlp = BayesianMLP(1, 1, hidden=(4,), likelihood=LIKELIHOOD)
    model = from_module(tanh_net(), likelihood=LIKELIHOOD)
    draws = []
    for network in (model, mlp):
        pyro.set_rng_seed(0)
        draws.append(pyro.infer.Predictive(network, num_samples=6, parallel=True)(X)["obs"])
    assert draws[0].shape == (6, 24)
    torch.testing.assert_close(draws[0], draws[1])
    theta = torch.randn(sum(site.numel for site in model.sites), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(output_jacobian(model, X, theta, 0), output_jacobian(mlp, X, theta, 0))
    weights = split_flat(model.sites, theta)
    with torch.no_grad():
        expected = torch.func.functional_call(model.module, weights, (X,))
    torch.testing.assert_close(model.forward(X, weights), expected)


def test_a_module_with_one_output_of_shape_n_is_reshaped():
    model = from_module(nn.Sequential(nn.Linear(2, 1), nn.Flatten(0)))
    weights = {"0.weight": torch.ones(3, 1, 2), "0.bias": torch.zeros(3, 1)}
    assert model.out_features == 1 and model.forward(torch.ones(5, 2), weights).shape == (3, 5, 1)


def test_batchnorm_in_eval_mode_is_an_affine_layer_of_its_running_statistics():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Tanh(), nn.Linear(3, 1))
    module(torch.randn(50, 2))  # running statistics away from (0, 1)
    module.eval()
    model = from_module(module)
    weights = {name: value.detach().expand(2, *value.shape) for name, value in module.named_parameters()}
    x = torch.randn(4, 2)
    with torch.no_grad():
        torch.testing.assert_close(model.forward(x, weights), module(x).expand(2, 4, 1))


@pytest.mark.parametrize("bayesian, chosen", [
    ("last-layer", ["head.weight", "head.bias"]),
    (["features"], ["features.0.weight", "features.0.bias"]),
    (["head.bias", "features.0.weight"], ["features.0.weight", "head.bias"]),
])
def test_bayesian_chooses_the_sites_and_the_rest_is_held_fixed(bayesian, chosen):
    model = from_module(Regressor(), bayesian=bayesian)
    assert [site.name for site in model.sites] == chosen and model.needs_point_fit()
    assert model.held_fixed() == [name for name, _ in Regressor().named_parameters() if name not in chosen]
    with pytest.raises(ValueError, match=r"are not Bayesian and their point values are not set yet: fit the network with "
                                         r"bnn.inference.fit"):
        model.forward(X, {site.name: torch.zeros(site.shape) for site in model.sites})


@pytest.mark.long
def test_fit_sets_the_point_parameters_at_the_map_of_the_wholly_bayesian_network():
    module = tanh_net()
    partial = from_module(module, bayesian="last-layer", likelihood=LIKELIHOOD)
    options = {"map_steps": 100, "seed": 3, "progress": False}
    posterior = fit(partial, (X, Y), "map", map_options=options, **options)
    whole = fit(from_module(module, likelihood=LIKELIHOOD), (X, Y), "map", **options)
    assert posterior.record.held_at_map == ["0.weight", "0.bias"] and whole.record.held_at_map == []
    for name in ("0.weight", "0.bias"):
        torch.testing.assert_close(posterior.model.point_values[name], whole.samples[name][0, 0])
    assert not posterior.model.needs_point_fit() and partial.needs_point_fit()  # the user's network is left alone


@pytest.mark.long
def test_last_layer_bayes_equals_laplace_over_the_last_layer_of_the_whole_network():
    """The MAP stage gives the features of the whole network's MAP; Laplace over the last layer with them held fixed is
    then Laplace's ``structure="last-layer"`` on the whole network: the same covariance to round-off (the GGN of a
    Gaussian likelihood depends on the features alone) and the same mean within the MAP's tolerance."""
    module = tanh_net().double()
    options = {"map_steps": 300, "map_tolerance": 1e-6, "seed": 0, "progress": False}
    laplace = {"num_samples": 10, "tune_prior_precision": False, **options}
    with warnings.catch_warnings(), default_dtype(torch.float64):  # the MAP's draws, hence the point values, in float64
        warnings.simplefilter("ignore")  # a MAP on 24 points may stop at its iteration limit
        whole = fit(from_module(module, likelihood=LIKELIHOOD), (X.double(), Y.double()), "laplace",
                    structure="last-layer", **laplace)
        partial = fit(from_module(module, bayesian="last-layer", likelihood=LIKELIHOOD), (X.double(), Y.double()),
                      "laplace", map_options=options, **laplace)
    whole_guide, partial_guide = whole.extras["guide"], partial.extras["guide"]
    covariance = whole_guide.covariance()
    round_off = torch.linalg.cond(covariance) * torch.finfo(torch.float64).eps  # inverting loses cond x eps
    torch.testing.assert_close(partial_guide.covariance(), covariance, rtol=10 * round_off, atol=0)
    standard_deviation = partial_guide.covariance().diagonal().sqrt()
    shift = (partial_guide.mean - whole_guide.mean[whole_guide.covered_from:]).abs()
    assert (shift <= 2 * options["map_tolerance"] * standard_deviation).all(), shift / standard_deviation


@pytest.mark.parametrize("bayesian", ["all", "last-layer"])
@pytest.mark.parametrize("method", [pytest.param(name, marks=pytest.mark.long) if name in SECONDS else name
                                    for name in any_network_methods()])
def test_every_method_fits_it_wholly_or_partly_bayesian(method, bayesian):
    model = from_module(tanh_net(), bayesian=bayesian, likelihood=LIKELIHOOD)
    map_options = None if bayesian == "all" else {"map_steps": 50, "map_max_iter": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps cannot converge
        posterior = fit(model, (X, Y), method, seed=0, progress=False, map_options=map_options, **QUICK[method])
    assert set(posterior.samples) == {site.name for site in model.sites}
    assert posterior.record.held_at_map == ([] if bayesian == "all" else ["0.weight", "0.bias"])
    prediction = posterior.predict(X, seed=0)
    assert prediction.mean.shape == (24,) and torch.isfinite(prediction.mean).all()
    assert torch.isfinite(posterior.pointwise_log_likelihood(X, Y)).all()


@pytest.mark.parametrize("module", [tanh_net(), nn.Sequential(nn.Linear(1, 4), nn.Tanh(), nn.Dropout(0.2), nn.Linear(4, 1))])
def test_mc_dropout_refuses_it_before_the_map_stage_even_with_dropout_layers(module, monkeypatch):
    """The module runs in eval mode (its nn.Dropout layers are off) and states no dropout of the weights' inputs."""
    monkeypatch.setattr("bnn.inference.core.point_parameters.fit_point_parameters",
                        lambda *args: pytest.fail("work started"))
    with pytest.raises(ValueError, match=r"method 'mc-dropout' needs a network that says where its dropout goes .* "
                                         r"which TorchModuleNetwork is not; use csgld, ensemble, laplace, map, multiswag, nuts"):
        fit(from_module(module, bayesian="last-layer"), (X, Y), "mc-dropout")


def test_a_method_run_directly_refuses_unset_point_parameters_and_map_options_need_them():
    partial = from_module(tanh_net(), bayesian="last-layer")
    with pytest.raises(ValueError, match=r"method 'map' fits the Bayesian parameters of a partly Bayesian network, whose "
                                         r"parameters \['0.weight', '0.bias'\] must be fitted at a point first: call "
                                         r"bnn.inference.fit"):
        fit_map(partial, X, Y)
    with pytest.raises(ValueError, match="this TorchModuleNetwork has none to fit; leave map_options out"):
        fit(from_module(tanh_net()), (X, Y), "map", map_options={"map_steps": 5})
    with pytest.raises(ValueError, match="map_stepz"):  # the MAP stage's options are checked before it runs
        fit(partial, (X, Y), "map", map_options={"map_stepz": 5})


@pytest.mark.long
def test_a_partly_bayesian_fit_saves_and_loads_with_its_module(tmp_path):
    options = {"map_steps": 50, "map_max_iter": 5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = fit(from_module(Regressor(), bayesian="last-layer", likelihood=LIKELIHOOD), (X, Y), "laplace",
                        seed=0, progress=False, map_options=options, num_samples=20, **options)
    posterior.save(tmp_path / "run")
    assert (tmp_path / "run" / "network.safetensors").is_file()
    loaded = Posterior.load(tmp_path / "run", module=Regressor())
    assert isinstance(loaded.model, TorchModuleNetwork) and isinstance(loaded.model.module, Regressor)
    assert loaded.model.config() == posterior.model.config() and loaded.record.held_at_map == ["features.0.weight",
                                                                                              "features.0.bias"]
    for name, value in posterior.model.point_values.items():
        torch.testing.assert_close(loaded.model.point_values[name], value)
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, posterior.predict(X, seed=0).mean)
    torch.testing.assert_close(loaded.predict(X, seed=0, predictive="mc").mean,
                               posterior.predict(X, seed=0, predictive="mc").mean)
    config = json.loads((tmp_path / "run" / "fit.json").read_text())["model"]
    with pytest.raises(ValueError, match="a torch-module network's config does not hold its module"):
        network_from_config(config)


def test_the_saved_state_of_another_network_is_refused():
    with pytest.raises(ValueError, match="'mlp' network keeps no state beside its config"):
        network_from_config(BayesianMLP(1).config(), {"module": nn.Linear(1, 1)})


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.head = nn.LSTM(2, 3, batch_first=True), nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x.unsqueeze(1))[0][:, -1])


class Matrices(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).reshape(-1, 2, 3)


@pytest.mark.parametrize("build, error, message", [
    (lambda: from_module(lambda x: x), TypeError, "from_module needs a torch.nn.Module, got function"),
    (lambda: from_module(nn.Tanh()), ValueError, "Tanh has no parameters, so there is nothing to make Bayesian"),
    (lambda: from_module(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))), ValueError,
     r"layer '1' \(BatchNorm1d\) is in training mode and tracks running statistics.*call module.eval\(\) first"),
    (lambda: from_module(Recurrent(), in_features=2), ValueError,
     r"Recurrent cannot be evaluated as a Bayesian network: its forward on a probe batch .* failed \(RuntimeError: "
     r"Batching rule not implemented for aten::lstm"),
    (lambda: from_module(tanh_net(), in_features=3), ValueError,
     r"Sequential cannot be evaluated .* probe batch x of shape \(3, 3\) .* failed \(RuntimeError"),
    (lambda: from_module(Matrices()), ValueError, r"maps a probe batch of 3 rows to shape \(3, 2, 3\); a network's "
                                                  r"output is \(n, K\)"),
    (lambda: from_module(nn.Sequential(nn.Unflatten(1, (1, 4)), nn.Conv1d(1, 1, 2), nn.Flatten())), ValueError,
     "its first layer with parameters is a Conv1d, not an nn.Linear .* give in_features="),
    (lambda: from_module(tanh_net(), bayesian=["head"]), ValueError,
     r"bayesian names 'head', which matches no parameter of Sequential; its parameters are \['0.weight'"),
    (lambda: from_module(nn.Sequential(nn.Unflatten(1, (1, 4)), nn.Conv1d(1, 1, 2), nn.Flatten()), in_features=4,
                         bayesian="last-layer"), ValueError, "bayesian='last-layer' takes the last nn.Linear"),
    (lambda: from_module(tanh_net(), out_features=2), ValueError, "makes 1 outputs on a probe batch, not the "
                                                                  "out_features=2 given"),
])
def test_what_cannot_be_made_bayesian_is_refused_when_built(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_a_conv_module_given_in_features_is_made_bayesian():
    module = nn.Sequential(nn.Unflatten(1, (1, 4)), nn.Conv1d(1, 2, 2), nn.Tanh(), nn.Flatten(), nn.Linear(6, 1))
    model = from_module(module, in_features=4)
    assert [(s.name, s.fan_in) for s in model.sites] == [("1.weight", 2), ("1.bias", 2), ("4.weight", 6), ("4.bias", 6)]
    weights = {name: value.detach().expand(3, *value.shape) for name, value in module.named_parameters()}
    x = torch.randn(5, 4)
    with torch.no_grad():
        torch.testing.assert_close(model.forward(x, weights), module(x).expand(3, 5, 1))
