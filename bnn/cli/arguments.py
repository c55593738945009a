"""The options ``fit`` and ``compare`` share: the data, the model, and the methods' fit options."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from bnn.cli.option_flags import add_method_flags, given_options
from bnn.datasets import DATASETS
from bnn.experiments.comparison.time_budget import parse_duration
from bnn.models import ACTIVATIONS, LIKELIHOODS, PRIORS, BayesianCNN, BayesianMLP, BayesianNetwork, get_likelihood
from bnn.models.cnn import DEFAULT_CNN_PRIOR, POOLINGS

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "mlp": {"hidden": (50,), "activation": "tanh"},
    "cnn": {"hidden": (32,), "activation": "silu", "channels": (8, 16), "kernel_size": 3, "pool": 2, "pooling": "avg"},
}
"""``--model``'s networks and the defaults of their flags (what ``None`` means for a flag not given)."""
CNN_FLAGS = ("channels", "kernel_size", "pool", "pooling")
"""The flags (as attribute names) that only ``--model cnn`` reads."""
NO_HIDDEN_LAYER = "none"
"""``--hidden none``: a network without hidden layers (Bayesian linear or logistic regression)."""


def _positive_integers(text: str, flag: str, noun: str, example: str, empty_hint: str = "") -> tuple[int, ...]:
    """Comma-separated positive integers (``noun``) for ``flag``; an empty text or an empty entry is an error."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"{flag} takes comma-separated {noun} like {example} with no empty one, got "
                                         f"{text!r}{empty_hint}")
    try:
        widths = tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} takes comma-separated {noun} like {example}, got {text!r}") from None
    if any(w < 1 for w in widths):
        raise argparse.ArgumentTypeError(f"{flag} {noun} must be positive, got {text!r}")
    return widths


def _widths(text: str) -> tuple[int, ...]:
    """``--hidden``: comma-separated positive widths, or ``none``; an empty text or an empty width is an error."""
    if text.strip().lower() == NO_HIDDEN_LAYER:
        return ()
    return _positive_integers(text, "--hidden", "widths", "50,50", f"; write --hidden {NO_HIDDEN_LAYER} for a network without "
                                                         "hidden layers")


def _channels(text: str) -> tuple[int, ...]:
    """``--channels``: the output channels of each convolution block, comma-separated positive integers."""
    return _positive_integers(text, "--channels", "channel counts", "8,16")


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    for parse in (int, float):
        try:
            return key, parse(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def duration_argument(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _noise(text: str) -> float | None:
    if text == "learned":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--noise takes 'learned' or a positive number, got {text!r}") from None


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Data and model options shared by the subcommands."""
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", default="toy1d", metavar="NAME",
                      help=f"built-in {{{','.join(DATASETS.names())}}}, or a UCI folder name with --uci-dir")
    data.add_argument("--uci-dir", type=Path, help="folder of a UCI benchmark in its standard layout: one folder per data set "
                      "with data/data.txt and the split index files")
    data.add_argument("--split", type=int, help="UCI split number (default 0); needs --uci-dir")
    model = parser.add_argument_group("model")
    model.add_argument("--model", choices=list(MODEL_DEFAULTS), default="mlp",
                       help="mlp: a fully connected network; cnn: convolution blocks then a dense head (BayesianCNN), "
                            "reading a row as the data set's signal or image, or as a 1-D signal over its columns when "
                            "the data set has no input shape (default mlp)")
    model.add_argument("--hidden", type=_widths, default=None,
                       help=f"hidden widths (of the CNN's dense head), comma-separated (default 50 for mlp, 32 for cnn); "
                            f"'{NO_HIDDEN_LAYER}' for no hidden layer")
    model.add_argument("--activation", choices=ACTIVATIONS.names(), default=None, help="default tanh for mlp, silu for cnn")
    cnn = parser.add_argument_group("cnn (with --model cnn)")
    cnn.add_argument("--channels", type=_channels, default=None, help="output channels of each convolution block, "
                     "comma-separated (default 8,16)")
    cnn.add_argument("--kernel-size", type=int, default=None, help="convolution kernel width along each axis (default 3)")
    cnn.add_argument("--pool", type=int, default=None, help="pooling window and stride (default 2)")
    cnn.add_argument("--pooling", choices=sorted(POOLINGS), default=None,
                     help="each pooling window's mean or largest value (default avg; max puts kinks in the log joint)")
    # the posterior prior holds a mean and a scale per weight: it comes from a fit (posterior.as_prior()), not a flag
    model.add_argument("--prior", choices=[name for name in PRIORS.names() if name != "posterior"], default="gaussian",
                       help="the prior of every weight (default gaussian: N(0, 1), and N(0, 4/fan_in) for --model cnn "
                            "unless --prior-option fan_in_scaling=false)")
    model.add_argument("--prior-option", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="prior option, repeatable, for example scale=0.5")
    model.add_argument("--likelihood", choices=[name for name in LIKELIHOODS.names()
                                                if LIKELIHOODS.get(name).task == "regression" and name != "gaussian"],
                       help="regression only: another likelihood than the Gaussian of --noise, for example "
                            "heteroscedastic-gaussian (the network outputs a mean and a scale per input)")
    model.add_argument("--noise", type=_noise, default=None, metavar="learned|SIGMA",
                       help="regression noise in standardised units: 'learned' (default) or a fixed value")


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """The run's seed and progress, the guide's options, and every method's options (:mod:`bnn.cli.option_flags`:
    each forwarded only when given)."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--guide-option", "--guide-options", type=_key_value, action="append", default=[],
                        metavar="KEY=VALUE", dest="guide_option",
                        help="an option of the svi guide (guide_options), repeatable, for example init_scale=0.01")
    add_method_flags(parser)


def uci_split(args: argparse.Namespace) -> int:
    """The UCI split ``--split`` names (default 0)."""
    return 0 if args.split is None else args.split


def build_model(args: argparse.Namespace, dataset) -> BayesianNetwork:
    """The model the arguments describe (``--model``), sized for ``dataset``; a CNN reads the data set's
    ``input_shape``, or each row as a 1-D signal (said on stderr) when it has none. ``ValueError`` for a CNN flag
    given with ``--model mlp``."""
    likelihood: dict[str, Any] = {"name": dataset.likelihood_name}
    if args.likelihood is not None:
        if dataset.task != "regression" or args.noise is not None:
            raise ValueError(f"--likelihood {args.likelihood} applies to regression data, without --noise (the network "
                             "outputs the noise scale)")
        likelihood = {"name": args.likelihood}
    elif dataset.task == "regression":
        likelihood["scale"] = args.noise
    elif args.noise is not None:
        raise ValueError("--noise applies to regression only")
    outputs = get_likelihood(likelihood).network_outputs(dataset.out_features)
    prior = {"name": args.prior, **dict(args.prior_option)}
    if args.model == "cnn" and args.prior == DEFAULT_CNN_PRIOR["name"]:
        prior = {**DEFAULT_CNN_PRIOR, **prior}  # fan-in scaled unless the user says otherwise
    given = {key: getattr(args, key) for key in ("hidden", "activation", *CNN_FLAGS) if getattr(args, key) is not None}
    if args.model == "mlp":
        if given.keys() & set(CNN_FLAGS):
            flags = sorted(f"--{key.replace('_', '-')}" for key in given.keys() & set(CNN_FLAGS))
            raise ValueError(f"{', '.join(flags)} apply to --model cnn only")
        return BayesianMLP(dataset.in_features, outputs, **{**MODEL_DEFAULTS["mlp"], **given}, prior=prior,
                           likelihood=likelihood)
    if dataset.input_shape is None:
        print(f"--model cnn: data set {dataset.name!r} has no input shape; each row is read as a 1-D signal over its "
              f"{dataset.in_features} columns", file=sys.stderr)
    return BayesianCNN(dataset.in_features, outputs, input_shape=dataset.input_shape,
                       **{**MODEL_DEFAULTS["cnn"], **given}, prior=prior, likelihood=likelihood)


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fit options the user gave on the command line."""
    options = given_options(args)
    if args.guide_option:
        options["guide_options"] = dict(args.guide_option)
    return {**options, "seed": args.seed, "progress": not args.quiet}


def command_line(args: argparse.Namespace) -> str:
    """The command that made the run, quoted so that a shell runs it again."""
    return shlex.join(["bnn", *args.argv])
