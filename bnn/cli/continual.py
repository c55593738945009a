"""``bnn continual``: the continual benchmark from the command line (resumable: rerun the same command)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from bnn.datasets.continual import CONTINUAL_BENCHMARKS
from bnn.experiments.continual.report import markdown_tables, write_continual_report
from bnn.experiments.continual.run import run_continual
from bnn.inference.continual import CONTINUAL_METHODS

OPTION_ARGUMENTS = ("hidden", "prior_scale", "steps", "lr", "init_rho", "num_samples", "coreset_size", "std_init",
                    "mean_eta", "mc_samples", "batch_size", "seed")
ONE_METHODS_OPTIONS = {"coreset_size": "vcl-coreset", "std_init": "bgd", "mean_eta": "bgd", "mc_samples": "bgd",
                       "batch_size": "bgd"}
"""The options only one method reads: given without that method they would be ignored, so they are refused."""


def _widths(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(width) for width in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--hidden takes comma-separated widths such as 100 or 100,100, got {text!r}") from None


def add_continual_parser(commands) -> None:
    """Add the subcommand ``continual`` to ``bnn``'s subparsers ``commands``."""
    parser = commands.add_parser(
        "continual", help="learn a sequence of tasks with several methods; the score on every task seen so far",
        description="Each method learns the tasks in order; after each task it is scored on every task seen so far. "
                    "Finished tasks are kept in --out: the same command resumes at the next task.")
    parser.add_argument("--benchmark", choices=CONTINUAL_BENCHMARKS.names(), default="split-digits")
    parser.add_argument("--methods", default=",".join(CONTINUAL_METHODS.names()),
                        help=f"comma-separated, from {CONTINUAL_METHODS.names()} (default all)")
    parser.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    parser.add_argument("--hidden", type=_widths, help="shared hidden widths, comma-separated (default 100)")
    parser.add_argument("--prior-scale", type=float, help="scale of the first prior N(0, s^2) (default 1)")
    parser.add_argument("--steps", type=int, help="Adam steps per fit, bgd's updates per task (default 1500)")
    parser.add_argument("--lr", type=float, help="Adam's rate (default 0.01)")
    parser.add_argument("--init-rho", type=float, help="initial rho of the mean-field guide (default -5)")
    parser.add_argument("--num-samples", type=int, help="posterior draws for prediction (default 100)")
    parser.add_argument("--coreset-size", type=int, help="coreset examples per task, vcl-coreset (default 40)")
    parser.add_argument("--std-init", type=float,
                        help="bgd: first scale of every weight (default 0.05 for classification, 0.0025 for regression)")
    parser.add_argument("--mean-eta", type=float, help="bgd: factor of the means' update (default 1)")
    parser.add_argument("--mc-samples", type=int, help="bgd: draws per update, an even number (default 10)")
    parser.add_argument("--batch-size", type=int, help="bgd: rows per update (default 32)")
    parser.add_argument("--seed", type=int, help="seed of the fits and the coreset (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no line per finished task")
    parser.set_defaults(run=run_continual_command)


def run_continual_command(args: argparse.Namespace) -> None:
    """Run the benchmark, write ``report.md``, ``continual.png`` and ``continual.json`` into ``--out``, print the tables."""
    methods = [name.strip() for name in args.methods.split(",") if name.strip()]
    options = {name: getattr(args, name) for name in OPTION_ARGUMENTS if getattr(args, name) is not None}
    for name, method in ONE_METHODS_OPTIONS.items():
        if name in options and method not in methods:
            raise ValueError(f"--{name.replace('_', '-')} applies to {method} only, which --methods {','.join(methods)} "
                             "leaves out; drop the option or add the method")
    try:
        result = run_continual(args.benchmark, methods, args.out, report=None if args.quiet else print, **options)
    except FloatingPointError as error:  # a method left the finite numbers: its message names the option to lower
        raise ValueError(str(error)) from None
    report = write_continual_report(result, args.out, shlex.join(["bnn", *args.argv]))
    print(markdown_tables(result) + f"\nwritten: {report}")
