"""Command line: ``bnn fit ...``, ``bnn compare ...``, ``bnn continual ...``, ``bnn uci ...`` (or ``python -m bnn ...``);
choices come from the registries.

Every run writes into ``--out`` atomically: the folder appears complete or not at all (``continual``: each
finished task's folder; ``uci``: each finished cell's file; so that the same command resumes). An SVI ``fit``
checkpoints into ``<out>/checkpoint`` (every ``DEFAULT_CHECKPOINT_EVERY`` steps and on Ctrl-C/SIGTERM) until the
completed result replaces it; Ctrl-C ends the command with status 130 and a line saying what was kept; an SVI fit
stopped by a non-finite ELBO leaves its last finite posterior in ``--out`` (``metrics.json`` says ``stopped``), or
beside it in ``<out>-stopped`` when ``--out`` holds a complete result. ``--overwrite`` replaces only a folder this tool
wrote (:mod:`bnn.runtime.atomic`), and ``--out`` keeps apart from the inputs.
"""

from __future__ import annotations

import argparse
import signal
import sys

from bnn.cli.compare import add_compare_parser
from bnn.cli.continual import add_continual_parser
from bnn.cli.fit import add_fit_parser, checkpoint_folder
from bnn.cli.uci import add_uci_parser
from bnn.datasets import DATASETS
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``bnn``: subcommands ``fit``, ``compare``, ``continual`` and ``uci``, choices from the registries.

    Returns
    -------
    argparse.ArgumentParser
        Parsed arguments carry ``run``, the function of the chosen subcommand.
    """
    parser = argparse.ArgumentParser(prog="bnn", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_fit_parser(commands)
    add_compare_parser(commands)
    add_continual_parser(commands)
    add_uci_parser(commands)
    return parser


def check_data_arguments(args: argparse.Namespace) -> None:
    """Refuse a ``--dataset`` that is not built in (without ``--uci-dir``) and a ``--split`` without ``--uci-dir``."""
    if "dataset" not in args or args.uci_dir is not None:  # bnn continual reads no --dataset
        return
    if args.dataset not in DATASETS:
        raise ValueError(f"unknown dataset {args.dataset!r}; choose a built-in one from {DATASETS.names()}, or pass "
                         f"--uci-dir with the folder of the UCI benchmark for a UCI data set such as 'yacht'")
    if args.split is not None:
        raise ValueError(f"--split {args.split} picks a split of a UCI data set; pass --uci-dir too, or drop --split "
                         f"(the built-in {args.dataset!r} has one fixed split)")


def interrupted_message(args: argparse.Namespace, error: KeyboardInterrupt) -> str:
    """One line on what a Ctrl-C or SIGTERM kept: the fit's own account (SVI's checkpoint and how to ``--resume``,
    the draws NUTS kept), else the checkpoint folder if it holds one, else nothing. A bare ``KeyboardInterrupt``
    (Ctrl-C) or ``KeyboardInterrupt("SIGTERM")`` (:mod:`bnn.console`) carries no account."""
    if str(error) not in ("", "SIGTERM"):
        return f"interrupted: {error}"
    by = " by SIGTERM" if str(error) else ""
    folder = checkpoint_folder(args)
    if folder is not None and (folder / CHECKPOINT_FILE).exists():
        return (f"interrupted{by}: {folder} holds the last SVI checkpoint; continue with the same options and "
                f"--resume {folder}")
    return f"interrupted{by}: nothing was kept; {args.out} is as it was before the command"


def main(argv: list[str] | None = None) -> int:
    """Run ``bnn`` (the console script, or ``python -m bnn``) with ``argv``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``bnn`` (default ``sys.argv[1:]``); the run records them as its
        command.

    Returns
    -------
    int
        0 on success. Bad input exits with status 2 and a one-line ``error: ...`` (argparse's own usage
        errors too); Ctrl-C or SIGTERM (:mod:`bnn.console` turns SIGTERM into ``KeyboardInterrupt``), even one a
        fit survived by keeping its draws, with status 130 and a line saying what was kept.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        check_data_arguments(args)
        args.run(args)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    except KeyboardInterrupt as error:
        for signum in (signal.SIGINT, signal.SIGTERM):  # stopping already: a second stop must not kill the exit
            signal.signal(signum, signal.SIG_IGN)
        parser.exit(130, interrupted_message(args, error) + "\n")
    return 0
