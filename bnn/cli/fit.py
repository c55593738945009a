"""``bnn fit``: one model, one method; ``metrics.json``, the posterior and a plot in ``--out``.

``--out`` is written atomically: the folder appears complete or not at all. An SVI fit checkpoints into
``<out>/checkpoint`` (every ``DEFAULT_CHECKPOINT_EVERY`` steps and on Ctrl-C/SIGTERM) until the completed result
replaces it; an SVI fit stopped by a non-finite ELBO leaves its last finite posterior in ``--out`` (``metrics.json``
says ``stopped``), or beside it in ``<out>-stopped`` when ``--out`` holds a complete result.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from bnn.cli.arguments import add_fit_arguments, add_model_arguments, build_model, command_line, fit_options, uci_split
from bnn.datasets import load_dataset
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.evaluation.plots import plot_fit
from bnn.inference.fit import METHODS, fit
from bnn.inference.svi.checkpoint import DEFAULT_CHECKPOINT_EVERY
from bnn.inference.svi.nonfinite import KEPT_POSTERIOR, NonFiniteELBOError
from bnn.models import BayesianNetwork
from bnn.runtime.atomic import (
    MARKER,
    atomic_directory,
    check_apart,
    claim_entry,
    mark,
    result_state,
    write_json,
)

CHECKPOINT_FOLDER = "checkpoint"


def checkpoints(method: str | None) -> bool:
    """Whether ``method`` writes checkpoints (its options take ``checkpoint_dir``)."""
    return method in METHODS and "checkpoint_dir" in METHODS.get(method).options.names()


def checkpoint_folder(args: argparse.Namespace) -> Path | None:
    """Where a ``fit`` of a method that checkpoints (SVI: its options take ``checkpoint_dir``) keeps its checkpoints:
    the ``--resume`` folder, else ``<out>/checkpoint``; ``None`` for other methods and for ``compare``."""
    if not checkpoints(getattr(args, "method", None)):
        return None
    return args.resume if args.resume is not None else args.out / CHECKPOINT_FOLDER


def checkpoint_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--checkpoint-every`` and ``--resume`` as fit options. An SVI fit always checkpoints (every
    ``DEFAULT_CHECKPOINT_EVERY`` steps unless ``--checkpoint-every`` says otherwise, and on Ctrl-C/SIGTERM) into
    ``<out>/checkpoint``, which the completed result replaces, or on into the ``--resume`` folder."""
    options: dict[str, Any] = {}
    if args.checkpoint_every is not None:
        options["checkpoint_every"] = args.checkpoint_every  # another method refuses it by name
    if args.resume is not None:
        options["resume"] = args.resume
    elif checkpoints(args.method):
        options["checkpoint_dir"] = checkpoint_folder(args)
    return options


def run_metrics(args: argparse.Namespace, dataset, model: BayesianNetwork, posterior) -> dict[str, Any]:
    """What ``metrics.json`` records: the run, the test metrics (none for a stopped fit) and the entries of the
    fit's record (:meth:`~bnn.inference.core.record.FitRecord.metrics`: SVI's final ELBO and why it stopped early,
    NUTS's diagnostics, verdict and faults, Laplace's curvature, MAP convergence and evidence)."""
    record = posterior.record
    stopped = getattr(record, "stopped", None) is not None
    return {
        "dataset": dataset.name, "split": uci_split(args) if args.uci_dir else None, "method": args.method,
        "guide": record.guide, "prior": args.prior, "model": repr(model), "seed": args.seed,
        "train_seconds": record.train_seconds, **({} if stopped else evaluate(posterior, dataset)),
        **record.metrics(), "command": command_line(args),
    }


def move_stopped_checkpoint(error: NonFiniteELBOError, args: argparse.Namespace, staging: Path) -> bool:
    """Move the checkpoint of a fit stopped by a non-finite ELBO into ``staging`` when it lives in ``--out``; return
    whether it did."""
    if error.checkpoint is None or error.checkpoint.parent != args.out / CHECKPOINT_FOLDER:
        return False
    os.replace(error.checkpoint.parent, staging / CHECKPOINT_FOLDER)
    return True


def keep_stopped_fit(error: NonFiniteELBOError, args: argparse.Namespace, staging: Path) -> str:
    """Move the checkpoint of a fit stopped by a non-finite ELBO into ``staging``, which replaces ``--out``; return
    the message that names what ``--out`` holds."""
    move_stopped_checkpoint(error, args, staging)
    kept = f"{args.out} holds the posterior with the parameters before that step (metrics.json says why it stopped)"
    return str(error).replace(KEPT_POSTERIOR, kept)


def resumes_own_checkpoint(args: argparse.Namespace) -> bool:
    """Whether ``--resume`` names ``<out>/checkpoint``, the checkpoint of an earlier run into the same ``--out``."""
    resume = getattr(args, "resume", None)
    return resume is not None and resume.resolve() == (args.out / CHECKPOINT_FOLDER).resolve()


def check_out_folder(args: argparse.Namespace) -> None:
    """Refuse, before any work, an ``--out`` that is, holds or lies in an input (``--uci-dir``, a ``--resume`` folder
    other than ``<out>/checkpoint``; see :func:`~bnn.runtime.atomic.check_apart`), and one that holds only the
    checkpoint of an unfinished run when neither ``--resume`` nor ``--overwrite`` says what to do with it."""
    resume = None if resumes_own_checkpoint(args) else getattr(args, "resume", None)
    check_apart(args.out, {"--uci-dir": args.uci_dir, "--resume": resume})
    if result_state(args.out) == "checkpoint" and not args.overwrite and not resumes_own_checkpoint(args):
        raise ValueError(f"{args.out} holds the checkpoint of an unfinished run; continue it with the same options and "
                         f"--resume {args.out / CHECKPOINT_FOLDER}, or pass --overwrite to start again")


@contextmanager
def claimed_checkpoint_folder(args: argparse.Namespace) -> Iterator[None]:
    """Within the block ``<out>/checkpoint`` is ours (:func:`~bnn.runtime.atomic.claim_entry`), for an SVI fit to
    write there; under ``--overwrite`` the checkpoint of an earlier run there is dropped, since this run starts again.
    A run refused (``ValueError``) before its first checkpoint leaves ``--out`` as it found it."""
    existed, ours = args.out.exists(), result_state(args.out) is not None
    claim_entry(args.out, CHECKPOINT_FOLDER)
    if args.overwrite:
        shutil.rmtree(args.out / CHECKPOINT_FOLDER, ignore_errors=True)
    try:
        yield
    except ValueError as error:
        if not ours and not isinstance(error, NonFiniteELBOError) and not (args.out / CHECKPOINT_FOLDER).exists():
            (args.out / MARKER).unlink()
            if not existed:
                args.out.rmdir()
        raise


def write_result(args: argparse.Namespace, dataset, model: BayesianNetwork, posterior, folder: Path, stopped: bool) -> dict:
    """Write ``metrics.json``, the posterior and (a completed fit) ``predictive.png`` into ``folder``; mark a stopped
    fit's folder ``stopped``. Return the metrics."""
    metrics = run_metrics(args, dataset, model, posterior)
    posterior.write_into(folder)
    if not stopped:
        plot_fit({posterior.record.label: posterior}, dataset, folder / "predictive.png")
    write_json(folder / "metrics.json", metrics)
    if stopped:
        mark(folder, "stopped")
    return metrics


def stopped_beside(args: argparse.Namespace, error: NonFiniteELBOError, dataset, model: BayesianNetwork) -> str:
    """Write a stopped fit into ``<out>-stopped``, beside the complete result in ``--out`` that it must not replace;
    return the message."""
    beside = args.out.with_name(f"{args.out.name}-stopped")
    with atomic_directory(beside, writer="bnn fit", overwrite=True) as staging:
        moved = move_stopped_checkpoint(error, args, staging)
        write_result(args, dataset, model, error.posterior, staging, stopped=True)
    kept = (f"{args.out} keeps its complete earlier result; this stopped fit, with the parameters before that step, is in "
            f"{beside} (metrics.json says why it stopped)")
    message = str(error).replace(KEPT_POSTERIOR, kept)
    return message.replace(str(error.checkpoint), str(beside / CHECKPOINT_FOLDER / error.checkpoint.name)) if moved else message


def run_fit(args: argparse.Namespace) -> dict[str, Any]:
    """Fit one model and write ``metrics.json``, ``posterior.nc`` (+ ``fit.json``) and ``predictive.png``.

    An SVI fit stopped by a non-finite ELBO writes its last finite posterior and ``metrics.json`` (with
    ``stopped``, no test metrics) and then raises ``ValueError`` naming the folder: ``--out``, or ``<out>-stopped``
    when ``--out`` holds a complete result (a stopped fit never replaces one).
    """
    check_out_folder(args)
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=uci_split(args), seed=args.seed)
    model = build_model(args, dataset)
    options = {**fit_options(args), **checkpoint_options(args)}
    stopped = None
    with atomic_directory(args.out, writer="bnn fit", overwrite=args.overwrite or resumes_own_checkpoint(args),
                          command=command_line(args)) as staging:
        try:
            with claimed_checkpoint_folder(args) if "checkpoint_dir" in options else nullcontext():
                posterior = fit(model, dataset, args.method, **options)
        except NonFiniteELBOError as error:
            if error.posterior is None:  # nothing valid to keep: --out is not written
                raise ValueError(f"{error}. {args.out} keeps this run's checkpoint beside anything it held before; to "
                                 "start again, run the command with the change the hint suggests and --overwrite") from None
            if result_state(args.out) == "complete":
                raise ValueError(stopped_beside(args, error, dataset, model)) from None
            posterior, stopped = error.posterior, keep_stopped_fit(error, args, staging)
        metrics = write_result(args, dataset, model, posterior, staging, stopped is not None)
    if stopped is not None:
        raise ValueError(stopped)
    for key, value in metrics.items():
        if key != "command":
            print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    stop_if_interrupted(posterior, f"{args.out} holds what it kept, marked incomplete in metrics.json")
    return metrics


def stop_if_interrupted(posterior, kept: str) -> None:
    """Raise ``KeyboardInterrupt`` (the command then exits with status 130) when Ctrl-C or SIGTERM cut the fit
    short and it returned what it had made; the message says what the fit kept and ``kept`` where it is."""
    reason = posterior.record.interrupted
    if reason is not None:
        raise KeyboardInterrupt(f"{posterior.record.method} {reason}; {kept}")


def add_fit_parser(commands) -> None:
    """Add the subcommand ``fit`` to ``bnn``'s subparsers ``commands``."""
    parser = commands.add_parser("fit", help="fit one model, write metrics, posterior and a plot")
    add_model_arguments(parser)
    add_fit_arguments(parser)
    checkpoints = parser.add_argument_group("svi checkpoints")
    checkpoints.add_argument("--checkpoint-every", type=int, metavar="N", help="checkpoint every N steps (default "
                             f"{DEFAULT_CHECKPOINT_EVERY}) and on Ctrl-C/SIGTERM into <out>/{CHECKPOINT_FOLDER} "
                             "(gone once the run completes)")
    checkpoints.add_argument("--resume", type=Path, metavar="DIR", help="continue from the checkpoint in DIR (same options)")
    parser.add_argument("--out", type=Path, required=True, help="result folder (created atomically)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument("--method", choices=METHODS.names(), default="svi")
    parser.set_defaults(run=run_fit)
