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
from tests.support.quick_options import QUICK, SECONDS, any_network_list, any_network_methods

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
                                         rf"which TorchModuleNetwork is not; use {any_network_list()}"):
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


class Linear1(nn.Module):
    """One ``nn.Linear(1, 1)`` under a forward of its own (the cases below change it)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)


class CountsInABuffer(Linear1):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.offset.add_(1)
        return self.linear(x) + self.offset


class CountsInAnAttribute(Linear1):
    calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.linear(x) * self.calls


class WithoutGradient(Linear1):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.linear(x)


class DetachesTheFeatures(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features, self.head = nn.Linear(1, 3), nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.features(x)).detach())


class ScalesXInPlace(Linear1):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return self.linear(x)


class ReturnsATuple(Linear1):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), x


class ReturnsADict(Linear1):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"output": self.linear(x)}


class ReturnsIntegers(Linear1):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).round().long()


@pytest.mark.parametrize("module, message", [
    (CountsInABuffer, r"CountsInABuffer changes its own state when it runs: its buffer 'offset' changed.* a "
                        r"network's output must depend on x and the weights alone"),
    (CountsInAnAttribute, r"CountsInAnAttribute changes its own state when it runs: two calls at the same x and "
                            r"weights gave different outputs"),
    (WithoutGradient, r"no gradient reaches the parameters \['linear.weight', 'linear.bias'\] from "
                        r"WithoutGradient's output, so a fit would leave them at their start.*torch.no_grad\(\), .detach\(\)"),
    (DetachesTheFeatures, r"no gradient reaches the parameters \['features.weight', 'features.bias'\]"),
    (ScalesXInPlace, r"ScalesXInPlace changes its input x in place .* x.mul_\(2\) .*x = x \* 2"),
    (ReturnsATuple, r"ReturnsATuple returns a tuple, not a tensor: .* return the output tensor, \(n, K\)"),
    (ReturnsADict, r"ReturnsADict returns a dict, not a tensor"),
    (ReturnsIntegers, r"ReturnsIntegers returns torch.int64 outputs: a network's output is floating point"),
])
def test_a_forward_that_is_not_a_function_of_x_and_the_weights_is_refused_when_built(module, message):
    with pytest.raises(ValueError, match=message):
        from_module(module())


def test_parameters_held_at_a_point_need_a_gradient_until_their_point_values_are_given():
    """The MAP stage fits the parameters held at a point: without a gradient it would leave them at their start; given
    point values (a fitted network, a frozen feature extractor) they need none."""
    module = DetachesTheFeatures()
    with pytest.raises(ValueError, match=r"no gradient reaches the parameters \['features.weight', 'features.bias'\]"):
        from_module(module, bayesian="last-layer")
    points = {"features.weight": module.features.weight.detach(), "features.bias": module.features.bias.detach()}
    model = TorchModuleNetwork(module, bayesian="last-layer", point_values=points)
    assert [site.name for site in model.sites] == ["head.weight", "head.bias"] and not model.needs_point_fit()


class WithAnEmptyParameter(Linear1):
    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Parameter(torch.empty(0, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


@pytest.mark.parametrize("module, message", [
    (lambda: nn.Sequential(nn.Linear(1, 3), nn.BatchNorm1d(3, track_running_stats=False), nn.Linear(3, 1)).eval(),
     r"layer '1' \(BatchNorm1d\) keeps no running statistics \(track_running_stats=False\): it normalises each batch "
     r"by its own statistics in any mode.*"),
    (WithAnEmptyParameter, r"parameter 'unused' has no elements \(shape \(0, 3\)\): nothing in it can be Bayesian; "
                           r"remove it from the module"),
])
def test_a_layer_that_cannot_be_made_bayesian_is_refused_by_its_structure(module, message):
    with pytest.raises(ValueError, match=message):
        from_module(module())


class Scaled(Linear1):
    """A 0-dim parameter: one scalar weight."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def test_a_scalar_parameter_is_a_weight_site_of_shape_empty():
    model = from_module(Scaled(), in_features=1)
    assert [(site.name, tuple(site.shape)) for site in model.sites] == [("scale", ()), ("linear.weight", (1, 1)),
                                                                       ("linear.bias", (1,))]
    weights = {"scale": torch.tensor([2.0, 3.0]), "linear.weight": torch.ones(2, 1, 1), "linear.bias": torch.zeros(2, 1)}
    torch.testing.assert_close(model.forward(X[:3], weights), torch.stack([2 * X[:3], 3 * X[:3]]))


@pytest.mark.parametrize("method", [pytest.param(name, marks=pytest.mark.long) if name in SECONDS else name
                                    for name in any_network_methods()])
def test_every_method_fits_a_module_with_a_scalar_parameter(method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps cannot converge
        posterior = fit(from_module(Scaled(), in_features=1, likelihood=LIKELIHOOD), (X, Y), method, seed=0,
                        progress=False, **QUICK[method])
    assert posterior.samples["scale"].dim() == 2  # (chains or members, draws)
    assert torch.isfinite(posterior.predict(X, seed=0).mean).all()


class Tied(nn.Module):
    """The same weight in two layers (``second.weight`` is ``first.weight``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inputs, self.first, self.second, self.head = nn.Linear(1, 2), nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 1)
        self.second.weight = self.first.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.second(torch.tanh(self.first(torch.tanh(self.inputs(x)))))))


def test_a_weight_tied_across_two_layers_is_one_site_and_jit_svi_fits_it():
    module = Tied()
    model = from_module(module, likelihood=LIKELIHOOD)
    assert "first.weight" in [site.name for site in model.sites] and "second.weight" not in model.latent_shapes
    posterior = fit(model, (X, Y), "svi", steps=5, num_samples=4, jit=True, seed=0, progress=False)
    weights = {name: value[0, 0] for name, value in posterior.samples.items() if name in model.latent_shapes}
    with torch.no_grad():
        expected = torch.func.functional_call(module, weights, (X,))  # both layers at the one drawn weight
    torch.testing.assert_close(model.forward(X, weights), expected)
    names = list(weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings on the shape checks, which Pyro's JIT ignores too
        traced = torch.jit.trace(lambda x, *values: model.forward(x, dict(zip(names, values))), (X, *weights.values()))
    moved = {name: value + 0.5 for name, value in weights.items()}  # the traced forward reads the tied weight as an input
    torch.testing.assert_close(traced(X, *moved.values()), model.forward(X, moved))
