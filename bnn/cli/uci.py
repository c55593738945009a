"""``bnn uci``: the UCI benchmark grid from the command line (resumable: rerun the same command)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from bnn.experiments.uci.grid import parse_splits
from bnn.experiments.uci.ray_cluster import import_ray
from bnn.experiments.uci.run import EXECUTORS, run_uci
from bnn.experiments.uci.table import RESULTS_FILE, TABLE_FILE
from bnn.inference.fit import METHODS


def _setting(text: str) -> tuple[str, str, Any]:
    """``METHOD.OPTION=VALUE`` as ``(method, option, value)``; the value read as JSON when it is JSON, else text."""
    key, equals, raw = text.partition("=")
    method, dot, option = key.rpartition(".")
    if not (equals and dot and method and option):
        raise argparse.ArgumentTypeError(f"--set takes METHOD.OPTION=VALUE such as svi.steps=5000, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return method, option.replace("-", "_"), value


def _splits(text: str) -> list[int]:
    try:
        return parse_splits(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_uci_parser(commands) -> None:
    """Add the subcommand ``uci`` to ``bnn``'s subparsers ``commands``."""
    parser = commands.add_parser(
        "uci", help="the UCI regression benchmark on its standard splits, beside the published numbers",
        description="Fit each method on each split of each data set under the papers' protocol (one hidden layer of "
                    "n_hidden.txt units, standardised with the training split, test RMSE and log-likelihood in the "
                    f"target's units); write {RESULTS_FILE} and {TABLE_FILE} into --out. Each cell is kept as it "
                    "finishes: the same command resumes.")
    parser.add_argument("--uci-dir", type=Path, required=True, help="folder of data set folders in the standard layout")
    parser.add_argument("--datasets", default="all", help="comma-separated folder names, or all (default)")
    parser.add_argument("--methods", default="svi,laplace", help=f"comma-separated, from {METHODS.names()} (default "
                        "svi,laplace)")
    parser.add_argument("--splits", type=_splits, default=parse_splits("0-19"),
                        help="split numbers: 0-19 (default), 0,3,5 or 0-2,7; a data set with fewer runs those it has")
    parser.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="local: processes on this machine (default); ray: tasks on a Ray cluster")
    parser.add_argument("--address", help="a running Ray cluster's address (ray start --head prints it); without it "
                        "--executor ray starts a local one")
    parser.add_argument("--workers", type=int, help="cells at once (local) or a local Ray cluster's cores (default: "
                        "the cores this process may use)")
    parser.add_argument("--set", type=_setting, action="append", default=[], metavar="METHOD.OPTION=VALUE",
                        help="a fit option of one method, such as svi.steps=5000 (repeatable)")
    parser.add_argument("--conformal", type=float, metavar="SHARE",
                        help="also score 90%% conformal intervals: a second fit per cell on the training rows this "
                        "share (0.2 is usual) leaves, calibrated on the share, tested on the test split")
    parser.add_argument("--seed", type=int, default=0, help="split k fits with seed + k (default 0)")
    parser.add_argument("--max-retries", type=int, default=2, help="Ray: retries of a failed or lost task (default 2)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run_uci_command)


def run_uci_command(args: argparse.Namespace) -> None:
    """Run the grid and print ``table.md``."""
    overrides: dict[str, dict[str, Any]] = {}
    for method, option, value in args.set:
        overrides.setdefault(method, {})[option] = value
    methods = [name.strip() for name in args.methods.split(",") if name.strip()]
    try:
        import_ray() if args.executor == "ray" else None
    except ImportError as error:
        raise ValueError(str(error)) from None
    run_uci(args.uci_dir, args.datasets, methods, args.splits, args.out, executor=args.executor, address=args.address,
            workers=args.workers, overrides=overrides, seed=args.seed, max_retries=args.max_retries,
            progress=not args.quiet, command=shlex.join(["bnn", *args.argv]), conformal=args.conformal)
    print((args.out / TABLE_FILE).read_text() + f"\nwritten: {args.out / RESULTS_FILE}, {args.out / TABLE_FILE}")
