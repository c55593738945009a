"""Command line: ``python -m inference fit ...``; choices come from the registries.

Every run writes into ``--out`` atomically: the folder appears complete or not at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bnn_data import load_dataset
from guides import GUIDES
from inference.atomic import atomic_directory, write_json
from inference.fit import METHODS, fit
from inference.metrics import evaluate
from inference.plots import plot_fit
from models import ACTIVATIONS, PRIORS, BayesianMLP

# CLI destination -> fit option, forwarded only when given (methods reject options they lack).
FIT_OPTIONS = {
    "guide": "guide", "steps": "steps", "epochs": "epochs", "lr": "lr", "lr_schedule": "lr_schedule",
    "batch_size": "batch_size", "num_particles": "num_particles", "jit": "jit", "num_draws": "num_draws",
}


def _widths(text: str) -> tuple[int, ...]:
    try:
        widths = tuple(int(part) for part in text.split(",") if part.strip())
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
    data.add_argument("--dataset", default="toy1d", help="built-in name, or a UCI folder name with --uci-dir")
    data.add_argument("--uci-dir", type=Path, help="folder of the UCI benchmark (for example ../shared/data/uci)")
    data.add_argument("--split", type=int, default=0, help="UCI split number")
    model = parser.add_argument_group("model")
    model.add_argument("--hidden", type=_widths, default=(50,), help="hidden widths, comma-separated (default 50)")
    model.add_argument("--activation", choices=ACTIVATIONS.names(), default="tanh")
    model.add_argument("--prior", choices=PRIORS.names(), default="gaussian")
    model.add_argument("--prior-option", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="prior option, repeatable, for example scale=0.5")
    model.add_argument("--noise", type=_noise, default=None, metavar="learned|SIGMA",
                       help="regression noise in standardised units: 'learned' (default) or a fixed value")


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """Inference options; each is forwarded only when given."""
    parser.add_argument("--method", choices=METHODS.names(), default="svi")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    svi = parser.add_argument_group("svi")
    svi.add_argument("--guide", choices=GUIDES.names())
    svi.add_argument("--guide-option", type=_key_value, action="append", default=[], metavar="KEY=VALUE")
    svi.add_argument("--steps", type=int)
    svi.add_argument("--epochs", type=int)
    svi.add_argument("--lr", type=float)
    svi.add_argument("--lr-schedule", choices=["constant", "exponential", "cosine"])
    svi.add_argument("--batch-size", type=int)
    svi.add_argument("--num-particles", type=int)
    svi.add_argument("--jit", action="store_true", default=None)
    svi.add_argument("--num-draws", type=int)


def build_model(args: argparse.Namespace, dataset) -> BayesianMLP:
    """The model the arguments describe, sized for ``dataset``."""
    likelihood: dict[str, Any] = {"name": dataset.likelihood_name}
    if dataset.task == "regression":
        likelihood["scale"] = args.noise
    elif args.noise is not None:
        raise ValueError("--noise applies to regression only")
    return BayesianMLP(
        dataset.in_features, dataset.out_features, hidden=args.hidden, activation=args.activation,
        prior={"name": args.prior, **dict(args.prior_option)}, likelihood=likelihood,
    )


def fit_options(args: argparse.Namespace) -> dict[str, Any]:
    """The fit options the user gave on the command line."""
    options = {option: getattr(args, dest) for dest, option in FIT_OPTIONS.items() if getattr(args, dest) is not None}
    if args.guide_option:
        options["guide_options"] = dict(args.guide_option)
    return {**options, "seed": args.seed, "progress": not args.quiet}


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    """Fit one model and write ``metrics.json``, ``posterior.nc`` (+ ``fit.json``) and ``predictive.png``."""
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=args.split, seed=args.seed)
    model = build_model(args, dataset)
    options = fit_options(args)
    with atomic_directory(args.out, overwrite=args.overwrite) as staging:
        posterior = fit(model, dataset, args.method, **options)
        metrics = {
            "dataset": dataset.name, "split": args.split if args.uci_dir else None, "method": args.method,
            "guide": posterior.info.get("guide"), "prior": args.prior, "model": repr(model), "seed": args.seed,
            "train_seconds": posterior.info["train_seconds"], **evaluate(posterior, dataset),
            "command": "python -m inference " + " ".join(sys.argv[1:]),
        }
        posterior.write_into(staging)
        plot_fit({f"{args.method} ({metrics['guide']})": posterior}, dataset, staging / "predictive.png")
        write_json(staging / "metrics.json", metrics)
    return metrics


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m inference", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fit_parser = commands.add_parser("fit", help="fit one model, write metrics, posterior and a plot")
    add_model_arguments(fit_parser)
    add_fit_arguments(fit_parser)
    fit_parser.add_argument("--out", type=Path, required=True, help="result folder (created atomically)")
    fit_parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    fit_parser.set_defaults(run=run_fit)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.run(args)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    for key, value in result.items():
        if isinstance(value, float):
            print(f"{key}: {value:.4g}")
        elif key != "command":
            print(f"{key}: {value}")
    return 0
