"""``bnn compare``: several methods on one model and data set, and the report that compares them; the work is
:func:`bnn.experiments.comparison.run.run_comparison`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from bnn.cli.arguments import (
    add_fit_arguments,
    add_model_arguments,
    build_model,
    command_line,
    duration_argument,
    fit_options,
    uci_split,
)
from bnn.datasets import load_dataset
from bnn.experiments.comparison.run import DEFAULT_METHODS, run_comparison
from bnn.inference.evaluation.cost import format_seconds
from bnn.inference.evaluation.shift_sets import SHIFT_SETS
from bnn.inference.fit import METHODS
from bnn.runtime.atomic import check_apart


def run_compare(args: argparse.Namespace) -> pd.DataFrame:
    """``bnn compare``: the arguments checked and parsed, the data loaded, then
    :func:`~bnn.experiments.comparison.run.run_comparison`; the table, its warnings and where the report is, printed."""
    check_apart(args.out, {"--uci-dir": args.uci_dir})  # found before minutes of fitting
    loaded = load_dataset(args.dataset, uci_dir=args.uci_dir, split=uci_split(args), seed=args.seed)
    options = {key: value for key, value in fit_options(args).items() if key not in ("seed", "progress")}
    table = run_comparison(loaded, args.methods, model=lambda dataset: build_model(args, dataset), out=args.out,
                           options=options, time_budget=args.time_budget, ood=args.ood, conformal=args.conformal,
                           seed=args.seed, overwrite=args.overwrite, progress=not args.quiet,
                           command=command_line(args), reference=args.reference)
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table.T.to_string())
    print("\n".join(line.replace("**", "") for line in table.attrs["warnings"]))
    print(f"report: {Path(args.out) / 'report.md'} (written in {format_seconds(table.attrs['report_seconds'])}; "
          f"estimated {format_seconds(table.attrs['report_estimate'])})")
    return table


def add_compare_parser(commands) -> None:
    """Add the subcommand ``compare`` to ``bnn``'s subparsers ``commands``."""
    parser = commands.add_parser(
        "compare", help="fit several methods on one model, write a comparison report",
        epilog="compare's own defaults, below any option given: "
        + "; ".join(f"{name}: {dict(METHODS.get(name).compare_options)}" for name in METHODS.names()
                    if METHODS.get(name).compare_options))
    add_model_arguments(parser)
    add_fit_arguments(parser)
    parser.add_argument("--methods", default=DEFAULT_METHODS,
                        help="comma-separated methods, optionally with a guide: svi:meanfield (default svi,nuts,laplace)")
    parser.add_argument("--out", type=Path, default=Path("results/compare"), help="report folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument("--time-budget", type=duration_argument, metavar="DURATION",
                        help="for example 90s, 10m, 1h30m: lower draws and steps, or leave a method out, to fit "
                        "within it by each method's cost, estimated (and printed) before any fit")
    parser.add_argument("--ood", choices=SHIFT_SETS.names(), metavar="SHIFT",
                        help=f"score how well each fit's uncertainty detects a shift set ({', '.join(SHIFT_SETS.names())}: "
                        "gap for toy1d, farthest for any data set, held-out-classes for a multiclass one, noise and "
                        "rotation for images), in the report and ood.csv; held-out-classes fits without those classes")
    parser.add_argument("--conformal", type=float, metavar="SHARE",
                        help="hold this share of the training rows out of every fit (seeded by --seed; 0.2 is usual) "
                        "and calibrate each fit's conformal 90%% sets on them, reported beside its own 90%% sets")
    parser.add_argument("--reference", metavar="METHOD_OR_FOLDER",
                        help="measure every other fit's predictive against this one's: a method of --methods (nuts), "
                        "or the folder of a saved fit of the same model and data (bnn fit --out); it must pass its own "
                        "check (R-hat of f(x) <= 1.01, bulk ESS >= 400, no divergences)")
    parser.set_defaults(run=run_compare)
