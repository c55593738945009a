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
from bnn.models import ARCHITECTURES, LIKELIHOODS, PRIORS, BayesianNetwork, get_likelihood
from bnn.models.architecture_flags import NO_HIDDEN_LAYER, Flag

DEFAULT_ARCHITECTURE = "mlp"
"""``--model`` when none is given."""


def model_choices() -> list[str]:
    """The architectures ``--model`` offers: those of :data:`~bnn.models.ARCHITECTURES` that state a
    :attr:`~bnn.models.network.BayesianNetwork.command_line`."""
    names = [name for name in ARCHITECTURES.names() if ARCHITECTURES.get(name).command_line is not None]
    return sorted(names, key=lambda name: name != DEFAULT_ARCHITECTURE)  # the default first, whose help a shared flag has


def architecture_flags() -> dict[str, list[tuple[str, Flag]]]:
    """Each flag name with the architectures that take it (and their flag, for its default)."""
    flags: dict[str, list[tuple[str, Flag]]] = {}
    for name in model_choices():
        for flag in ARCHITECTURES.get(name).command_line.flags:
            flags.setdefault(flag.name, []).append((name, flag))
    return flags


def _argument_type(flag: Flag):
    """``flag.parse`` as an argparse type: its ``ValueError`` becomes argparse's clear refusal."""
    def parse(text: str):
        try:
            return text if flag.parse is None else flag.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = flag.name
    return parse


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
    choices = model_choices()
    model.add_argument("--model", choices=choices, default=DEFAULT_ARCHITECTURE,
                       help="; ".join(f"{name}: {ARCHITECTURES.get(name).command_line.help}" for name in choices)
                       + f" (default {DEFAULT_ARCHITECTURE})")
    for name, owners in architecture_flags().items():
        flag = owners[0][1]
        defaults = ", ".join(f"{_shown(owner.default)} for {architecture}" for architecture, owner in owners)
        only = "" if len(owners) == len(choices) else f"; --model {' or '.join(a for a, _ in owners)} only"
        model.add_argument(flag.option, type=_argument_type(flag), choices=flag.choices, default=None, dest=name,
                           help=f"{flag.help} (default {defaults}{only})")
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


def _shown(default) -> str:
    """A flag's default as typed on the command line."""
    if isinstance(default, tuple):
        return ",".join(map(str, default)) if default else NO_HIDDEN_LAYER
    return str(default)


def build_model(args: argparse.Namespace, dataset) -> BayesianNetwork:
    """The model the arguments describe (``--model``, an architecture of :data:`~bnn.models.ARCHITECTURES` with its
    flags), sized for ``dataset`` (:meth:`~bnn.models.network.BayesianNetwork.for_data`); what the architecture does
    with a data set without an input shape is said on stderr. ``ValueError`` for a flag of another architecture."""
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
    architecture = ARCHITECTURES.get(args.model)
    own = {flag.name: flag for flag in architecture.command_line.flags}
    given = {name: getattr(args, name) for name in architecture_flags() if getattr(args, name, None) is not None}
    foreign = sorted(set(given) - set(own))
    if foreign:
        takers = sorted({owner for name in foreign for owner, _ in architecture_flags()[name]})
        raise ValueError(f"{', '.join(owners_flag(name) for name in foreign)} "
                         f"apply to --model {' or '.join(takers)} only")
    if dataset.input_shape is None and architecture.command_line.without_shape is not None:
        said = architecture.command_line.without_shape.format(columns=dataset.in_features)
        print(f"--model {args.model}: data set {dataset.name!r} has no input shape; {said}", file=sys.stderr)
    arguments = {name: flag.default for name, flag in own.items()} | given
    return architecture.for_data(dataset.in_features, outputs, dataset.input_shape,
                                 prior={"name": args.prior, **dict(args.prior_option)}, likelihood=likelihood,
                                 **arguments)


def owners_flag(name: str) -> str:
    """The flag as typed (``--kernel-size``) of the constructor argument ``name`` of some architecture."""
    return architecture_flags()[name][0][1].option


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fit options the user gave on the command line."""
    options = given_options(args)
    if args.guide_option:
        options["guide_options"] = dict(args.guide_option)
    return {**options, "seed": args.seed, "progress": not args.quiet}


def command_line(args: argparse.Namespace) -> str:
    """The command that made the run, quoted so that a shell runs it again."""
    return shlex.join(["bnn", *args.argv])
