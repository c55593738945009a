"""Command line: ``python -m inference fit ...``; choices come from the registries.

Every run writes into ``--out`` atomically: the folder appears complete or not at all.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from bnn_data import load_dataset
from guides import GUIDES
from inference.atomic import atomic_directory, write_json
from inference.compare import label_fits
from inference.curvature import HessianType, Structure
from inference.fit import METHODS, fit, keyword_options
from inference.kl_weights import KLWeighting
from inference.metrics import evaluate
from inference.nuts import InitStrategy
from inference.plots import plot_fit
from inference.report import write_comparison
from models import ACTIVATIONS, PRIORS, BayesianMLP

CHECKPOINT_FOLDER = "checkpoint"

# CLI destination -> fit option, forwarded only when given (methods reject options they lack).
FIT_OPTIONS = {
    "guide": "guide", "steps": "steps", "epochs": "epochs", "lr": "lr", "lr_schedule": "lr_schedule",
    "batch_size": "batch_size", "num_particles": "num_particles", "jit": "jit", "num_draws": "num_draws",
    "kl_weighting": "kl_weighting", "kl_warmup_fraction": "kl_warmup_fraction",
    "num_warmup": "num_warmup", "num_samples": "num_samples", "num_chains": "num_chains",
    "target_accept": "target_accept", "max_tree_depth": "max_tree_depth", "dense_mass": "dense_mass", "init": "init",
    "hessian": "hessian", "structure": "structure", "tune_prior_precision": "tune_prior_precision",
    "map_steps": "map_steps", "max_memory_gib": "max_memory_gib",
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


def add_fit_arguments(parser: argparse.ArgumentParser, *, checkpoints: bool = False) -> None:
    """Inference options; each is forwarded only when given. ``checkpoints`` adds the SVI checkpoint options
    (one fit, one checkpoint folder)."""
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
    svi.add_argument("--kl-weighting", choices=[w.value for w in KLWeighting], help="KL share per minibatch (default uniform)")
    svi.add_argument("--kl-warmup-fraction", type=float, help="with --kl-weighting warmup: fraction of the run (default 0.25)")
    if checkpoints:
        svi.add_argument("--checkpoint-every", type=int, metavar="N", help="checkpoint every N steps and on Ctrl-C/SIGTERM "
                         f"into <out>/{CHECKPOINT_FOLDER} (gone once the run completes)")
        svi.add_argument("--resume", type=Path, metavar="DIR", help="continue from the checkpoint in DIR (same options)")
    nuts = parser.add_argument_group("nuts")
    nuts.add_argument("--num-warmup", type=int, help="adaptation iterations per chain (default 200)")
    nuts.add_argument("--num-samples", type=int, help="draws kept per chain (default 200)")
    nuts.add_argument("--num-chains", type=int, help="chains, in parallel processes when cores allow (default min(2, cores))")
    nuts.add_argument("--target-accept", type=float, help="target acceptance probability (default 0.8)")
    nuts.add_argument("--max-tree-depth", type=int, help="at most 2^depth - 1 leapfrog steps per draw (default 10)")
    nuts.add_argument("--dense-mass", action="store_true", default=None, help="adapt a dense mass matrix")
    nuts.add_argument("--init", choices=[s.value for s in InitStrategy], help="chain start (default prior)")
    laplace = parser.add_argument_group("laplace")
    laplace.add_argument("--hessian", choices=[h.value for h in HessianType], help="likelihood curvature (default ggn)")
    laplace.add_argument("--structure", choices=[s.value for s in Structure], help="precision kept (default full)")
    laplace.add_argument("--tune-prior-precision", action="store_true", default=None,
                         help="scale a Gaussian prior's precision to maximise the Laplace evidence")
    laplace.add_argument("--map-steps", type=int, help="Adam steps before the L-BFGS polish (default 1000)")
    laplace.add_argument("--max-memory-gib", type=float, help="refuse a curvature needing more memory (default 2)")


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


def checkpoint_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--checkpoint-every`` and ``--resume`` as fit options: checkpoints go to ``<out>/checkpoint`` (which the
    completed result replaces), or on into the ``--resume`` folder."""
    options: dict[str, Any] = {}
    if args.checkpoint_every is not None:
        options["checkpoint_every"] = args.checkpoint_every
        if args.resume is None:
            options["checkpoint_dir"] = args.out / CHECKPOINT_FOLDER
    if args.resume is not None:
        options["resume"] = args.resume
    return options


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    """Fit one model and write ``metrics.json``, ``posterior.nc`` (+ ``fit.json``) and ``predictive.png``."""
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=args.split, seed=args.seed)
    model = build_model(args, dataset)
    options = {**fit_options(args), **checkpoint_options(args)}
    resuming_inside_out = args.resume is not None and args.out.resolve() in args.resume.resolve().parents
    with atomic_directory(args.out, overwrite=args.overwrite or resuming_inside_out) as staging:
        posterior = fit(model, dataset, args.method, **options)
        metrics = {
            "dataset": dataset.name, "split": args.split if args.uci_dir else None, "method": args.method,
            "guide": posterior.info.get("guide"), "prior": args.prior, "model": repr(model), "seed": args.seed,
            "train_seconds": posterior.info["train_seconds"], **evaluate(posterior, dataset),
            **posterior.info.get("diagnostics", {}),
            **{key: posterior.info[key] for key in ("incomplete", "incomplete_reason", "failed_chains") if key in posterior.info},
            "command": "python -m inference " + " ".join(sys.argv[1:]),
        }
        posterior.write_into(staging)
        label = args.method if metrics["guide"] is None else f"{args.method} ({metrics['guide']})"
        plot_fit({label: posterior}, dataset, staging / "predictive.png")
        write_json(staging / "metrics.json", metrics)
    for key, value in metrics.items():
        if key != "command":
            print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return metrics


def method_specs(text: str) -> list[tuple[str, str | None]]:
    """Parse ``svi,svi:meanfield,nuts`` into ``[("svi", None), ("svi", "meanfield"), ("nuts", None)]``."""
    specs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        method, _, guide = part.partition(":")
        METHODS.get(method)
        if guide:
            GUIDES.get(guide)
        specs.append((method, guide or None))
    if not specs:
        raise ValueError("--methods needs at least one method, for example svi,nuts,laplace")
    return specs


COMPARE_BUDGET: dict[str, dict[str, Any]] = {"nuts": {"max_tree_depth": 8}, "svi": {"jit": True}}
"""Per-method defaults of ``compare`` (under any option the user gives) that keep the no-option run under
3 minutes on 2 cores: NUTS trajectories of at most 255 leapfrog steps (toy1d's posterior fills the default
1023 in nearly every draw), SVI's ELBO compiled by the JIT."""


def options_per_method(specs: list[tuple[str, str | None]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Give each method the options it takes; refuse an option that no chosen method takes."""
    accepted = [set(keyword_options(METHODS.get(method))) for method, _ in specs]
    unused = sorted(set(options) - set().union(*accepted))
    if unused:
        raise ValueError(f"option(s) {unused} apply to none of the methods {[m for m, _ in specs]}")
    routed = []
    for (method, guide), names in zip(specs, accepted):
        chosen = {**COMPARE_BUDGET.get(method, {}), **{k: v for k, v in options.items() if k in names}}
        if guide is not None:
            if "guide" not in names:
                raise ValueError(f"method {method!r} takes no guide; write {method} instead of {method}:{guide}")
            chosen["guide"] = guide
        routed.append(chosen)
    return routed


def run_compare(args: argparse.Namespace) -> pd.DataFrame:
    """Fit every method on the same model and data, then write the comparison report into ``--out``."""
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=args.split, seed=args.seed)
    model = build_model(args, dataset)
    specs = method_specs(args.methods)
    routed = options_per_method(specs, fit_options(args))
    fits = [fit(model, dataset, method, **options) for (method, _), options in zip(specs, routed)]
    posteriors = label_fits(fits)
    command = "python -m inference " + " ".join(sys.argv[1:])
    table = write_comparison(posteriors, dataset, args.out, command=command, overwrite=args.overwrite)
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table.T.to_string())
    print(f"report: {Path(args.out) / 'report.md'}")
    return table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m inference", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    fit_parser = commands.add_parser("fit", help="fit one model, write metrics, posterior and a plot")
    add_model_arguments(fit_parser)
    add_fit_arguments(fit_parser, checkpoints=True)
    fit_parser.add_argument("--out", type=Path, required=True, help="result folder (created atomically)")
    fit_parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    fit_parser.add_argument("--method", choices=METHODS.names(), default="svi")
    fit_parser.set_defaults(run=run_fit)
    compare_parser = commands.add_parser(
        "compare", help="fit several methods on one model, write a comparison report",
        epilog="compare's own defaults, below any option given: "
        + "; ".join(f"{method}: {options}" for method, options in COMPARE_BUDGET.items()))
    add_model_arguments(compare_parser)
    add_fit_arguments(compare_parser)
    compare_parser.add_argument("--methods", default="svi,nuts,laplace",
                                help="comma-separated methods, optionally with a guide: svi:meanfield (default svi,nuts,laplace)")
    compare_parser.add_argument("--out", type=Path, default=Path("results/compare"), help="report folder")
    compare_parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    compare_parser.set_defaults(run=run_compare)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    return 0
