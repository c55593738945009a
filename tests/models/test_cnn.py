"""The Bayesian CNN and its batched layers: the forward against torch's own modules draw by draw, its sites, saving,
every method of :func:`bnn.inference.fit` on a tiny CNN, and the refusals."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
import torch
from bnn.inference import Posterior, fit
from bnn.models import BayesianCNN, BayesianMLP, LaplacePrior, network_from_config
from bnn.models.layers import conv, linear
from torch import nn
from torch.func import jacrev, vmap

from tests.support.quick_options import QUICK, SECONDS, any_network_methods

GENERATOR = torch.Generator().manual_seed(0)
X = torch.randn(24, 12, generator=GENERATOR)
Y = (X[:, :6].sum(1) > 0).float()


def tiny_cnn(**kwargs) -> BayesianCNN:
    """Twelve inputs as a 1-D signal, one block of 2 channels, a hidden layer of 3, a binary output: 45 weights."""
    return BayesianCNN(12, 1, **{"channels": (2,), "hidden": (3,), "likelihood": "bernoulli", **kwargs})


def random_weights(model, sample=(), seed=0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {site.name: torch.randn(*sample, *site.shape, generator=generator, dtype=torch.float64) for site in model.sites}


def as_sequential(model: BayesianCNN, weights: dict[str, torch.Tensor]) -> nn.Sequential:
    """The same network as torch modules holding one draw of ``weights``."""
    two_d = len(model.input_shape) == 2
    convolution = nn.Conv2d if two_d else nn.Conv1d
    pool = {("max", False): nn.MaxPool1d, ("max", True): nn.MaxPool2d, ("avg", False): nn.AvgPool1d,
            ("avg", True): nn.AvgPool2d}[model.pooling, two_d]
    activation = {"relu": nn.ReLU, "silu": nn.SiLU, "tanh": nn.Tanh}[model.activation]
    modules: list[nn.Module] = [nn.Unflatten(1, (1, *model.input_shape))]
    for block, (c_in, c_out) in enumerate(zip((1, *model.channels), model.channels)):
        layer = convolution(c_in, c_out, model.kernel_size, padding=model.kernel_size // 2)
        layer.weight.data, layer.bias.data = weights[f"features.{block}.weight"], weights[f"features.{block}.bias"]
        modules += [layer, activation(), pool(model.pool)]
    modules.append(nn.Flatten())
    widths = (model.sites[2 * len(model.channels)].shape[1], *model.hidden, model.out_features)
    for index, (d_in, d_out) in enumerate(zip(widths, widths[1:])):
        layer = nn.Linear(d_in, d_out)
        layer.weight.data, layer.bias.data = weights[f"classifier.{index}.weight"], weights[f"classifier.{index}.bias"]
        modules += [layer, activation()]
    return nn.Sequential(*modules[:-1]).double()


@pytest.mark.parametrize("sample", [(), (3,), (2, 3)])
@pytest.mark.parametrize("kernel", [(3,), (3, 2)])
def test_conv_is_torch_convolution_draw_by_draw(sample, kernel):
    spatial = (9,) if len(kernel) == 1 else (6, 5)
    generator = torch.Generator().manual_seed(1)
    weight = torch.randn(*sample, 4, 2, *kernel, generator=generator)
    bias = torch.randn(*sample, 4, generator=generator)
    reference = torch.nn.functional.conv1d if len(kernel) == 1 else torch.nn.functional.conv2d
    for h in (torch.randn(5, 2, *spatial, generator=generator), torch.randn(*sample, 5, 2, *spatial, generator=generator)):
        out = conv(h, weight, bias, name="features.0", stride=2, padding=1)
        assert out.shape[: len(sample) + 2] == (*sample, 5, 4)
        for draw in itertools.product(*map(range, sample)):
            rows = h[draw] if h.dim() > len(spatial) + 2 else h
            torch.testing.assert_close(out[draw], reference(rows, weight[draw], bias[draw], stride=2, padding=1))


def test_linear_is_torch_linear_draw_by_draw():
    generator = torch.Generator().manual_seed(2)
    h, weight, bias = torch.randn(5, 3, generator=generator), torch.randn(4, 2, 3, generator=generator), torch.randn(4, 2)
    out = linear(h, weight, bias, name="classifier.0")
    assert out.shape == (4, 5, 2)
    for draw in range(4):
        torch.testing.assert_close(out[draw], torch.nn.functional.linear(h, weight[draw], bias[draw]))


def test_conv_refuses_a_kernel_of_three_dimensions():
    with pytest.raises(ValueError, match=r"layer 'features.0': weight must be \(\*sample, C_out, C_in, "
                                         r"\*kernel\) with 1 or 2 kernel dimensions"):
        conv(torch.randn(2, 1, 4, 4, 4), torch.randn(3, 1, 2, 2, 2), torch.randn(3), name="features.0")


@pytest.mark.parametrize("activation, pooling", [("silu", "avg"), ("relu", "max")])
@pytest.mark.parametrize("input_shape, in_features", [((13,), 13), ((7, 6), 42)])
def test_the_batched_forward_is_a_sequential_of_torch_modules_draw_by_draw(input_shape, in_features, activation, pooling):
    model = BayesianCNN(in_features, 3, input_shape=input_shape, channels=(3, 4), hidden=(5,), activation=activation,
                        pooling=pooling, likelihood="categorical")
    x = torch.randn(6, in_features, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    weights = random_weights(model, sample=(2, 3))
    out = model.forward(x, weights)
    assert out.shape == (2, 3, 6, 3)
    for i in range(2):
        for j in range(3):
            draw = {name: value[i, j] for name, value in weights.items()}
            torch.testing.assert_close(out[i, j], as_sequential(model, draw)(x))
            torch.testing.assert_close(model.forward(x, draw), out[i, j])  # no sample dimension


def test_sites_in_order_with_global_layers_and_convolution_fan_ins():
    model = BayesianCNN(64, 10, input_shape=(8, 8), likelihood="categorical")
    assert [(site.name, tuple(site.shape), site.layer, site.fan_in) for site in model.sites] == [
        ("features.0.weight", (8, 1, 3, 3), 0, 9), ("features.0.bias", (8,), 0, 9),
        ("features.1.weight", (16, 8, 3, 3), 1, 72), ("features.1.bias", (16,), 1, 72),
        ("classifier.0.weight", (32, 64), 2, 64), ("classifier.0.bias", (32,), 2, 64),  # 16 channels x 2 x 2
        ("classifier.1.weight", (10, 32), 3, 32), ("classifier.1.bias", (10,), 3, 32)]
    assert [site.name for site in model.output_sites()] == ["classifier.1.weight", "classifier.1.bias"]
    # inputs; 8 x 8 x 8 convolved, 8 x 4 x 4 pooled; 16 x 4 x 4 convolved, 16 x 2 x 2 pooled; the dense layers
    assert model.activation_widths() == (64, 512, 128, 256, 64, 32, 10)
    assert model.dense_layers() is None
    assert BayesianCNN(40, 1).input_shape == (40,)  # no input_shape: a 1-D signal over the columns


def test_priors_per_block_and_dense_layer():
    model = tiny_cnn(prior={"*": "gaussian", "features.0": LaplacePrior(0.5), "classifier.1.bias": LaplacePrior(2.0)})
    assert isinstance(model.prior["features.0.weight"], LaplacePrior) and model.prior["classifier.1.bias"].scale == 2.0
    assert not isinstance(model.prior["classifier.0.weight"], LaplacePrior)


def test_relu_units_or_max_pooling_give_it_kinks():
    kinks = {(activation, pooling): tiny_cnn(activation=activation, pooling=pooling).has_kinks()
             for activation in ("silu", "relu") for pooling in ("avg", "max")}
    assert kinks == {("silu", "avg"): False, ("silu", "max"): True, ("relu", "avg"): True, ("relu", "max"): True}


def test_config_round_trip():
    model = BayesianCNN(64, 10, input_shape=(8, 8), channels=(4,), kernel_size=5, pool=1, hidden=(), activation="tanh",
                        prior=LaplacePrior(0.5), likelihood="categorical")
    config = model.config()
    assert config["architecture"] == "cnn" and config["input_shape"] == [8, 8] and config["channels"] == [4]
    rebuilt = network_from_config(config)
    assert isinstance(rebuilt, BayesianCNN) and rebuilt.config() == config
    x = torch.randn(3, 64, dtype=torch.float64)
    weights = random_weights(model)
    torch.testing.assert_close(rebuilt.forward(x, weights), model.forward(x, weights))


def test_per_row_jacobians_under_torch_func_match_autograd():
    """Laplace's curvature takes ``vmap(jacrev(...))`` of the forward over rows; it must agree with plain autograd."""
    model = BayesianCNN(16, 2, input_shape=(4, 4), channels=(2,), hidden=(3,), likelihood="categorical")
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    weights = random_weights(model, seed=5)
    names = list(weights)

    def output(values, row):
        return model.forward(row.unsqueeze(0), dict(zip(names, values)))[0]

    jacobians = vmap(jacrev(output), in_dims=(None, 0))(tuple(weights.values()), x)
    for row in range(3):
        expected = torch.autograd.functional.jacobian(lambda *values, row=row: output(values, x[row]), tuple(weights.values()))
        for got, want in zip(jacobians, expected):
            torch.testing.assert_close(got[row], want)


OWN_VARIANTS = [("svi", {"guide": "autonormal", "num_particles": 3}), ("svi", {"guide": "meanfield"}),
                ("laplace", {"structure": "full"}), ("laplace", {"structure": "diag"}),
                ("laplace", {"structure": "last-layer"})]
VARIANTS = OWN_VARIANTS + [(method, {}) for method in any_network_methods()
                           if method not in {name for name, _ in OWN_VARIANTS}]


@pytest.mark.parametrize("method, options", [
    pytest.param(method, options, marks=pytest.mark.long) if method in SECONDS else (method, options)
    for method, options in VARIANTS])
def test_every_method_that_takes_any_network_fits_a_tiny_cnn(method, options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few steps cannot converge; the checks of each method are tested elsewhere
        posterior = fit(tiny_cnn(), (X, Y), method, seed=0, progress=False, **{**QUICK[method], **options})
    assert set(posterior.samples) == {site.name for site in posterior.model.sites}
    for site in posterior.model.sites:
        assert posterior.samples[site.name].shape[-len(site.shape):] == site.shape
    prediction = posterior.predict(X, seed=0)
    assert prediction.mean.shape == (24,) and torch.isfinite(prediction.mean).all()
    assert torch.isfinite(posterior.pointwise_log_likelihood(X, Y)).all()


@pytest.mark.long
def test_a_fitted_cnn_saves_and_loads(tmp_path):
    posterior = fit(tiny_cnn(input_shape=(3, 4)), (X, Y), "map", seed=0, progress=False, **QUICK["map"])
    posterior.save(tmp_path / "run")
    loaded = Posterior.load(tmp_path / "run")
    assert isinstance(loaded.model, BayesianCNN) and loaded.model.config() == posterior.model.config()
    torch.testing.assert_close(loaded.predict(X, seed=0).mean, posterior.predict(X, seed=0).mean)


def test_mc_dropout_fits_it():
    """MC dropout drops channels (its own tests: tests/inference/mc_dropout/test_channel_dropout.py)."""
    posterior = fit(tiny_cnn(), (X, Y), "mc-dropout", steps=3, num_samples=4, progress=False)
    assert set(posterior.samples) == {site.name for site in posterior.model.sites}
    assert torch.isfinite(posterior.predict(X, seed=0).mean).all()


@pytest.mark.parametrize("arguments, message", [
    ({"input_shape": (5, 3)}, r"input_shape \(5, 3\) holds 15 values but in_features is 12: give an input_shape whose "
                              r"product is 12"),
    ({"input_shape": (2, 2, 3)}, r"input_shape must be \(length,\) or \(height, width\), got \(2, 2, 3\)"),
    ({"input_shape": (0, 12)}, "input_shape sizes must be positive integers, got 0"),
    ({"kernel_size": 13}, r"block 0 gets a signal of shape \(12,\), shorter than its kernel of 13; use kernel_size <= 12"),
    ({"input_shape": (2, 6), "kernel_size": 3}, r"block 0 gets a signal of shape \(2, 6\), shorter than its kernel of 3"),
    ({"channels": (2, 2, 2, 2)}, r"block 3 gets a signal of shape \(1,\), shorter than its kernel of 3"),
    ({"pool": 13}, r"a kernel of 3 \(padding 1\) then pooling by 13 leave \(0,\), no position; use a smaller "
                   r"kernel_size or pool"),
    ({"channels": ()}, r"channels must name one convolution block or more"),
    ({"channels": (2, 0)}, "channels must be positive integers, got 0"),
    ({"kernel_size": 2.5}, "kernel_size and pool must be positive integers, got 2.5"),
    ({"hidden": (-1,)}, "hidden widths must be positive integers, got -1"),
    ({"channels": 8}, r"channels must be a sequence, one entry per block like \(8, 16\), got 8"),
    ({"channels": "8,16"}, r"channels must be a sequence, one entry per block like \(8, 16\), got '8,16'"),
    ({"hidden": 32}, r"hidden must be a sequence, one entry per hidden layer like \(32,\), got 32"),
    ({"input_shape": 12}, r"input_shape must be a sequence, \(length,\) or \(height, width\), got 12"),
    ({"activation": "swish"}, "unknown activation 'swish'"),
    ({"pooling": "mean"}, r"pooling must be one of \['avg', 'max'\], got 'mean'"),
])
def test_bad_sizes_are_refused_when_built_naming_the_fix(arguments, message):
    with pytest.raises(ValueError, match=message):
        tiny_cnn(**arguments)


def test_numpy_integers_are_taken_as_sizes_and_kept_as_python_integers():
    model = BayesianCNN(np.int64(12), np.int64(1), input_shape=(np.int64(3), np.int32(4)), channels=np.array([2]),
                        kernel_size=np.int64(3), pool=np.int64(1), hidden=(np.int64(3),), likelihood="bernoulli")
    assert model.input_shape == (3, 4) and model.channels == (2,) and model.hidden == (3,)
    assert all(type(size) is int for size in (*model.input_shape, model.kernel_size, model.pool, model.in_features))
    json.dumps(model.config())  # the config stays JSON


def test_a_cnn_of_pointwise_kernels_without_pooling_is_a_linear_model():
    """A CNN whose one block keeps every position (kernel 1, pool 1) and has no hidden layer is a linear model of the
    inputs: its weights folded into one dense layer give the same output as the MLP without hidden layers."""
    cnn = BayesianCNN(12, 2, channels=(1,), kernel_size=1, pool=1, hidden=(), activation="relu", likelihood="categorical")
    weights = random_weights(cnn, seed=6)
    weights["features.0.weight"] = weights["features.0.weight"].abs()
    weights["features.0.bias"] = weights["features.0.bias"].abs()
    x = X.double().abs()  # every convolved value positive: the ReLU passes it through
    mlp = BayesianMLP(12, 2, hidden=(), likelihood="categorical")
    scale, shift = weights["features.0.weight"].reshape(()), weights["features.0.bias"].reshape(())
    folded = {"layers.0.weight": weights["classifier.0.weight"] * scale,
              "layers.0.bias": weights["classifier.0.bias"] + shift * weights["classifier.0.weight"].sum(-1)}
    torch.testing.assert_close(cnn.forward(x, weights), mlp.forward(x, folded))
