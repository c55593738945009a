"""The options ``fit`` and ``compare`` share: the data, the model, and the methods' fit options."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from bnn.cli.option_flags import add_method_flags, given_options
from bnn.datasets import DATASETS
from bnn.inference.evaluation.time_budget import parse_duration
from bnn.models import ACTIVATIONS, LIKELIHOODS, PRIORS, BayesianMLP, get_likelihood

NO_HIDDEN_LAYER = "none"
"""``--hidden none``: a network without hidden layers (Bayesian linear or logistic regression)."""


def _widths(text: str) -> tuple[int, ...]:
    """``--hidden``: comma-separated positive widths, or ``none``; an empty text or an empty width is an error."""
    if text.strip().lower() == NO_HIDDEN_LAYER:
        return ()
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"--hidden takes comma-separated widths like 50,50 with no empty one, got "
                                         f"{text!r}; write --hidden {NO_HIDDEN_LAYER} for a network without hidden layers")
    try:
        widths = tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--hidden takes comma-separated widths like 50,50, got {text!r}") from None
    if any(w < 1 for w in widths):
        raise argparse.ArgumentTypeError(f"hidden widths must be positive, got {text!r}")
    return widths


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
    model.add_argument("--hidden", type=_widths, default=(50,),
                       help=f"hidden widths, comma-separated (default 50); '{NO_HIDDEN_LAYER}' for no hidden layer")
    model.add_argument("--activation", choices=ACTIVATIONS.names(), default="tanh")
    # the posterior prior holds a mean and a scale per weight: it comes from a fit (posterior.as_prior()), not a flag
    model.add_argument("--prior", choices=[name for name in PRIORS.names() if name != "posterior"], default="gaussian")
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


def build_model(args: argparse.Namespace, dataset) -> BayesianMLP:
    """The model the arguments describe, sized for ``dataset``."""
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
    return BayesianMLP(
        dataset.in_features, outputs, hidden=args.hidden, activation=args.activation,
        prior={"name": args.prior, **dict(args.prior_option)}, likelihood=likelihood,
    )


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fit options the user gave on the command line."""
    options = given_options(args)
    if args.guide_option:
        options["guide_options"] = dict(args.guide_option)
    return {**options, "seed": args.seed, "progress": not args.quiet}


def command_line(args: argparse.Namespace) -> str:
    """The command that made the run, quoted so that a shell runs it again."""
    return shlex.join(["bnn", *args.argv])
