"""``--model``: the MLP or the CNN, with the CNN's flags, sized for the data set's input shape."""

from __future__ import annotations

import json

import pytest
from bnn.datasets import load_dataset
from bnn.models import ARCHITECTURES, BayesianCNN, BayesianMLP
from bnn.models.architecture_flags import CommandLine, Flag, integer

from bnn.cli.arguments import build_model, model_choices
from bnn.cli.main import build_parser, main


def model_for(capsys, dataset: str, *flags: str):
    """The model ``bnn fit --dataset DATASET FLAGS`` builds, and what it said on stderr."""
    args = build_parser().parse_args(["fit", "--out", "x", "--dataset", dataset, *flags])
    model = build_model(args, load_dataset(dataset))
    return model, capsys.readouterr().err


def test_the_mlp_stays_the_default_with_its_defaults(capsys):
    model, said = model_for(capsys, "breast_cancer")
    assert isinstance(model, BayesianMLP) and model.hidden == (50,) and model.activation == "tanh" and not said


def test_a_cnn_reads_the_data_sets_image_shape_with_its_defaults_or_the_flags(capsys):
    model, said = model_for(capsys, "digits", "--model", "cnn")
    assert isinstance(model, BayesianCNN) and not said
    assert model.arguments() == {"in_features": 64, "out_features": 10, "input_shape": [8, 8], "channels": [8, 16],
                                 "kernel_size": 3, "pool": 2, "pooling": "avg", "hidden": [32], "activation": "silu"}
    model, _ = model_for(capsys, "digits", "--model", "cnn", "--channels", "4", "--kernel-size", "5", "--pool", "1",
                         "--hidden", "none", "--activation", "tanh", "--pooling", "max", "--prior", "laplace")
    assert (model.channels, model.kernel_size, model.pool, model.pooling, model.hidden, model.activation) == (
        (4,), 5, 1, "max", (), "tanh")
    assert type(model.prior["features.0.weight"]).__name__ == "LaplacePrior"


def test_the_cnns_gaussian_prior_is_fan_in_scaled_unless_the_user_says_otherwise(capsys):
    """A convolution of 1 x 3 x 3 inputs gets N(0, 4/9), the dense layer after it N(0, 4/fan_in), as the class's
    default."""
    model, _ = model_for(capsys, "digits", "--model", "cnn")
    assert model.prior_config() == BayesianCNN(64, 10, input_shape=(8, 8), likelihood="categorical").prior_config()
    assert model.prior["features.0.weight"].site_scale(model.sites[0]) == pytest.approx(2 / 3)
    model, _ = model_for(capsys, "digits", "--model", "cnn", "--prior-option", "fan_in_scaling=false",
                         "--prior-option", "scale=0.5")
    assert model.prior["features.0.weight"].site_scale(model.sites[0]) == 0.5
    model, _ = model_for(capsys, "digits")
    assert model.prior["layers.0.weight"].site_scale(model.sites[0]) == 1.0  # the MLP's stays N(0, 1)


def test_a_cnn_on_tabular_data_reads_each_row_as_a_signal_and_says_so(capsys):
    model, said = model_for(capsys, "breast_cancer", "--model", "cnn")
    assert model.input_shape == (30,) and model.out_features == 1
    assert "data set 'breast_cancer' has no input shape; each row is read as a 1-D signal over its 30 columns" in said


@pytest.mark.parametrize("flags, message", [
    (["--channels", "4"], "--channels apply to --model cnn only"),
    (["--kernel-size", "5", "--pool", "1"], "--kernel-size, --pool apply to --model cnn only"),
    (["--pooling", "max"], "--pooling apply to --model cnn only"),
    (["--model", "cnn", "--kernel-size", "9"], "block 0 gets a signal of shape (8, 8), shorter than its kernel of 9; "
                                               "use kernel_size <= 8"),
    (["--model", "cnn", "--channels", "8,,16"], "--channels takes comma-separated channel counts like 8,16 with no empty one"),
    (["--model", "cnn", "--channels", "0"], "--channels channel counts must be positive, got '0'"),
    (["--model", "cnn", "--pool", "0"], "kernel_size and pool must be positive integers, got 0"),
    (["--model", "rnn"], "invalid choice: 'rnn'"),
])
def test_bad_model_flags_exit_with_a_clear_message(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--dataset", "digits", "--out", str(tmp_path / "x"), "--quiet", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.long
def test_fit_a_cnn_on_digits_end_to_end(tmp_path):
    out = tmp_path / "cnn"
    main(["fit", "--model", "cnn", "--dataset", "digits", "--channels", "2", "--hidden", "4", "--method", "svi",
          "--steps", "20", "--num-samples", "10", "--quiet", "--out", str(out)])
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["test_accuracy"] <= 1 and metrics["model"].startswith("BayesianCNN(")
    assert json.loads((out / "fit.json").read_text())["model"]["architecture"] == "cnn"


def test_compare_takes_the_same_model_flags():
    args = build_parser().parse_args(["compare", "--model", "cnn", "--channels", "4,8", "--pool", "1"])
    assert (args.model, args.channels, args.pool, args.kernel_size) == ("cnn", (4, 8), 1, None)


class WideLinear(BayesianMLP):
    """An architecture registered by a user: one hidden layer whose width is its own flag."""

    command_line = CommandLine("one hidden layer of --width units", (Flag("width", 7, "the hidden width",
                                                                          integer("--width")),))

    def __init__(self, in_features, out_features=1, *, width=7, prior="gaussian", likelihood="gaussian"):
        super().__init__(in_features, out_features, hidden=(width,), prior=prior, likelihood=likelihood)
        self.width = width

    def arguments(self):
        return {"in_features": self.in_features, "out_features": self.out_features, "width": self.width}


def test_a_newly_registered_architecture_reaches_model_with_its_own_flags(monkeypatch, capsys):
    monkeypatch.setitem(ARCHITECTURES._entries, "wide", WideLinear)
    assert "wide" in model_choices()
    model, _ = model_for(capsys, "breast_cancer", "--model", "wide", "--width", "5")
    assert isinstance(model, WideLinear) and model.hidden == (5,)
    with pytest.raises(ValueError, match="--width apply to --model wide only"):
        model_for(capsys, "breast_cancer", "--width", "5")
    with pytest.raises(ValueError, match="--channels apply to --model cnn only"):
        model_for(capsys, "breast_cancer", "--model", "wide", "--channels", "4")
