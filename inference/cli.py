"""Command line: ``bnn fit ...``, ``bnn compare ...``, ``bnn continual ...``, ``bnn uci ...`` (or ``python -m bnn ...``);
choices come from the registries.

Every run writes into ``--out`` atomically: the folder appears complete or not at all (``continual``: each
finished task's folder; ``uci``: each finished cell's file; so that the same command resumes). An SVI ``fit``
checkpoints into ``<out>/checkpoint`` (every ``DEFAULT_CHECKPOINT_EVERY`` steps and on Ctrl-C/SIGTERM) until the
completed result replaces it; Ctrl-C ends the command with status 130 and a line saying what was kept; an SVI fit
stopped by a non-finite ELBO leaves its last finite posterior in ``--out`` (``metrics.json`` says ``stopped``), or
beside it in ``<out>-stopped`` when ``--out`` holds a complete result. ``--overwrite`` replaces only a folder this tool
wrote (:mod:`bnn.inference.atomic`), and ``--out`` keeps apart from the inputs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pandas as pd
from bnn.datasets import DATASETS, load_dataset
from bnn.guides import GUIDES
from bnn.inference.atomic import (
    MARKER,
    atomic_directory,
    check_apart,
    check_replaceable,
    check_writable,
    claim_entry,
    mark,
    result_state,
    write_json,
)
from bnn.inference.continual.command import add_continual_parser
from bnn.inference.ensemble.options import MemberMethod
from bnn.inference.evaluation.compare import label_fits
from bnn.inference.evaluation.cost import format_seconds
from bnn.inference.evaluation.finished_fits import FinishedFits, run_fingerprint
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.evaluation.plots import plot_fit
from bnn.inference.evaluation.report import write_comparison
from bnn.inference.evaluation.time_budget import choose_fits, cost_lines, parse_duration
from bnn.inference.fit import METHODS, fit
from bnn.inference.laplace.curvature import HessianType, Structure
from bnn.inference.map import Objective
from bnn.inference.nuts import ChainMethod, Engine, InitStrategy
from bnn.inference.sgmcmc import Preconditioner, StepSchedule
from bnn.inference.stop_signals import sigterm_as_keyboard_interrupt
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE, DEFAULT_CHECKPOINT_EVERY
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.nonfinite import KEPT_POSTERIOR, NonFiniteELBOError
from bnn.inference.uci.command import add_uci_parser
from bnn.models import ACTIVATIONS, LIKELIHOODS, PRIORS, BayesianMLP, get_likelihood

CHECKPOINT_FOLDER = "checkpoint"

# CLI destination -> fit option, forwarded only when given (methods reject options they lack).
FIT_OPTIONS = {
    "guide": "guide", "steps": "steps", "epochs": "epochs", "lr": "lr", "lr_schedule": "lr_schedule",
    "batch_size": "batch_size", "num_particles": "num_particles", "jit": "jit",
    "kl_weighting": "kl_weighting", "kl_warmup_fraction": "kl_warmup_fraction",
    "num_warmup": "num_warmup", "num_samples": "num_samples", "num_chains": "num_chains",
    "target_accept": "target_accept", "max_tree_depth": "max_tree_depth", "dense_mass": "dense_mass", "init": "init",
    "hessian": "hessian", "structure": "structure", "tune_prior_precision": "tune_prior_precision",
    "objective": "objective", "map_steps": "map_steps", "map_lr": "map_lr", "map_tolerance": "map_tolerance",
    "map_max_iter": "map_max_iter",
    "max_memory_gib": "max_memory_gib", "engine": "engine", "chain_method": "chain_method",
    "dropout_rate": "dropout_rate", "num_members": "num_members", "member_method": "member_method",
    "step_size": "step_size", "step_schedule": "step_schedule", "decay_offset": "decay_offset", "decay_power": "decay_power",
    "thin": "thin", "friction": "friction", "precondition": "precondition",
}


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


def _duration(text: str) -> float:
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


def add_fit_arguments(parser: argparse.ArgumentParser, *, checkpoints: bool = False) -> None:
    """Inference options; each is forwarded only when given. ``checkpoints`` adds the SVI checkpoint options
    (one fit, one checkpoint folder)."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--num-samples", type=int, help="draws kept: per chain for nuts, sgld and sghmc (default 400 for "
                        "nuts, 1000 for sgld/sghmc); from the fitted posterior for svi, laplace, mc-dropout (default 1000)")
    svi = parser.add_argument_group("svi")
    svi.add_argument("--guide", choices=GUIDES.names())
    svi.add_argument("--guide-option", type=_key_value, action="append", default=[], metavar="KEY=VALUE")
    svi.add_argument("--steps", type=int)
    svi.add_argument("--epochs", type=int)
    svi.add_argument("--lr", type=float)
    svi.add_argument("--lr-schedule", choices=["constant", "exponential", "cosine"])
    svi.add_argument("--batch-size", type=int)
    svi.add_argument("--num-particles", type=int)
    svi.add_argument("--jit", action=argparse.BooleanOptionalAction, help="compile the ELBO (the default; --no-jit runs without)")
    svi.add_argument("--kl-weighting", choices=[w.value for w in KLWeighting], help="KL share per minibatch (default uniform)")
    svi.add_argument("--kl-warmup-fraction", type=float, help="with --kl-weighting warmup: fraction of the run (default 0.25)")
    if checkpoints:
        svi.add_argument("--checkpoint-every", type=int, metavar="N", help="checkpoint every N steps (default "
                         f"{DEFAULT_CHECKPOINT_EVERY}) and on Ctrl-C/SIGTERM into <out>/{CHECKPOINT_FOLDER} "
                         "(gone once the run completes)")
        svi.add_argument("--resume", type=Path, metavar="DIR", help="continue from the checkpoint in DIR (same options)")
    nuts = parser.add_argument_group("nuts")
    nuts.add_argument("--num-warmup", type=int, help="adaptation iterations per chain (default 400)")
    nuts.add_argument("--num-chains", type=int, help="chains, in parallel processes when cores allow (default min(2, cores))")
    nuts.add_argument("--target-accept", type=float, help="target acceptance probability (default 0.8)")
    nuts.add_argument("--max-tree-depth", type=int, help="at most 2^depth - 1 leapfrog steps per draw (default 10)")
    nuts.add_argument("--dense-mass", action=argparse.BooleanOptionalAction,
                      help="adapt a dense mass matrix (needs --engine pyro; default diagonal)")
    nuts.add_argument("--engine", choices=[e.value for e in Engine], help="NUTS implementation (default nutpie when installed)")
    nuts.add_argument("--chain-method", choices=[m.value for m in ChainMethod],
                      help="chains in processes or one after the other (default auto)")
    nuts.add_argument("--init", choices=[s.value for s in InitStrategy], help="chain start (default map)")
    laplace = parser.add_argument_group("laplace", "the --map-* options apply to --method map too; ensemble takes "
                                        "--map-steps, --map-lr and --map-tolerance")
    laplace.add_argument("--hessian", choices=[h.value for h in HessianType], help="likelihood curvature (default ggn)")
    laplace.add_argument("--structure", choices=[s.value for s in Structure], help="precision kept (default full)")
    laplace.add_argument("--tune-prior-precision", action=argparse.BooleanOptionalAction,
                         help="scale a Gaussian prior's precision to maximise the Laplace evidence (default: wherever "
                              "the priors are Gaussian and --hessian ggn)")
    laplace.add_argument("--objective", choices=[o.value for o in Objective],
                         help="--method map: the log joint (map, default) or the log-likelihood alone (mle, no prior)")
    laplace.add_argument("--map-steps", type=int, help="Adam steps before the MAP polish (default 1000)")
    laplace.add_argument("--map-lr", type=float, help="Adam's rate in the MAP fit (default 0.01)")
    laplace.add_argument("--map-tolerance", type=float, help="the MAP fit stops within this many posterior standard "
                         "deviations of the mode (Newton decrement; default 0.1)")
    laplace.add_argument("--map-max-iter", type=int, help="iterations of the MAP polish at most (default 1000)")
    laplace.add_argument("--max-memory-gib", type=float, help="refuse a curvature needing more memory (default 2)")
    mc_dropout = parser.add_argument_group("mc-dropout", "also --steps (default 3000), --lr (0.01), --batch-size (all)")
    mc_dropout.add_argument("--dropout-rate", type=float, help="probability of dropping each input of a layer (default 0.01)")
    ensemble = parser.add_argument_group("ensemble", "also --map-steps (default 1000)")
    ensemble.add_argument("--num-members", type=int, help="independent MAP fits, one draw each (default 5)")
    ensemble.add_argument("--member-method", choices=[m.value for m in MemberMethod],
                          help="members in processes or one after the other (default auto)")
    sgmcmc = parser.add_argument_group("sgld, sghmc", "also --num-warmup (burn-in steps; default sgld 10000, sghmc 5000), "
                                       "--num-samples (default 1000), --num-chains (default 2), --batch-size (default: "
                                       "all the data)")
    sgmcmc.add_argument("--step-size", type=float, help="first step size, SGHMC's learning rate (default sgld 1e-5, "
                        "sghmc 3e-6, for about 100 data points: scale by 100/N)")
    sgmcmc.add_argument("--step-schedule", choices=[s.value for s in StepSchedule],
                        help="constant, or polynomial: step_size * (1 + t / decay_offset) ** -decay_power (default constant)")
    sgmcmc.add_argument("--decay-offset", type=float, help="b of the polynomial schedule (default 1000)")
    sgmcmc.add_argument("--decay-power", type=float, help="gamma of the polynomial schedule, in (0.5, 1] (default 0.55)")
    sgmcmc.add_argument("--thin", type=int, help="steps per kept draw (default 10)")
    sgmcmc.add_argument("--friction", type=float, help="SGHMC momentum decay per step, in (0, 1) (default 0.05)")
    sgmcmc.add_argument("--precondition", choices=[p.value for p in Preconditioner], help="SGLD: rmsprop is pSGLD")


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
    options = {option: getattr(args, dest) for dest, option in FIT_OPTIONS.items() if getattr(args, dest) is not None}
    if args.guide_option:
        options["guide_options"] = dict(args.guide_option)
    return {**options, "seed": args.seed, "progress": not args.quiet}


def checkpoint_folder(args: argparse.Namespace) -> Path | None:
    """Where an SVI ``fit`` keeps its checkpoints: the ``--resume`` folder, else ``<out>/checkpoint``; ``None``
    for other methods and for ``compare``."""
    if getattr(args, "method", None) != "svi":
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
    elif args.method == "svi":
        options["checkpoint_dir"] = checkpoint_folder(args)
    return options


def command_line(args: argparse.Namespace) -> str:
    """The command that made the run, quoted so that a shell runs it again."""
    return shlex.join(["bnn", *args.argv])


def run_metrics(args: argparse.Namespace, dataset, model: BayesianMLP, posterior) -> dict[str, Any]:
    """What ``metrics.json`` records: the run, the test metrics (none for a stopped fit) and the entries of the
    fit's record (:meth:`~bnn.inference.record.FitRecord.metrics`: SVI's final ELBO and why it stopped early,
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
    other than ``<out>/checkpoint``; see :func:`~bnn.inference.atomic.check_apart`), and one that holds only the
    checkpoint of an unfinished run when neither ``--resume`` nor ``--overwrite`` says what to do with it."""
    resume = None if resumes_own_checkpoint(args) else getattr(args, "resume", None)
    check_apart(args.out, {"--uci-dir": args.uci_dir, "--resume": resume})
    if result_state(args.out) == "checkpoint" and not args.overwrite and not resumes_own_checkpoint(args):
        raise ValueError(f"{args.out} holds the checkpoint of an unfinished run; continue it with the same options and "
                         f"--resume {args.out / CHECKPOINT_FOLDER}, or pass --overwrite to start again")


@contextmanager
def claimed_checkpoint_folder(args: argparse.Namespace) -> Iterator[None]:
    """Within the block ``<out>/checkpoint`` is ours (:func:`~bnn.inference.atomic.claim_entry`), for an SVI fit to
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


def write_result(args: argparse.Namespace, dataset, model: BayesianMLP, posterior, folder: Path, stopped: bool) -> dict:
    """Write ``metrics.json``, the posterior and (a completed fit) ``predictive.png`` into ``folder``; mark a stopped
    fit's folder ``stopped``. Return the metrics."""
    metrics = run_metrics(args, dataset, model, posterior)
    posterior.write_into(folder)
    if not stopped:
        label = args.method if metrics["guide"] is None else f"{args.method} ({metrics['guide']})"
        plot_fit({label: posterior}, dataset, folder / "predictive.png")
    write_json(folder / "metrics.json", metrics)
    if stopped:
        mark(folder, "stopped")
    return metrics


def stopped_beside(args: argparse.Namespace, error: NonFiniteELBOError, dataset, model: BayesianMLP) -> str:
    """Write a stopped fit into ``<out>-stopped``, beside the complete result in ``--out`` that it must not replace;
    return the message."""
    beside = args.out.with_name(f"{args.out.name}-stopped")
    with atomic_directory(beside, overwrite=True) as staging:
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
    with atomic_directory(args.out, overwrite=args.overwrite or resumes_own_checkpoint(args)) as staging:
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


COMPARE_BUDGET: dict[str, dict[str, Any]] = {"svi": {"jit": True, "steps": 10000}}
"""Per-method defaults of ``compare`` (under any option the user gives). SVI runs 10,000 JIT-compiled steps, as ``fit``
does by default (pinned here so that compare's budget does not follow a change of ``fit``'s), with the rest of ``fit``'s
defaults: the meanfield guide with local reparameterisation, a cosine rate (``benchmarks/results/svi_defaults.md``:
on toy1d the ELBO reaches its plateau there, 2,000 steps stop about 48 nats below it). NUTS keeps ``fit``'s defaults, maximum
tree depth 10 included: a lower depth made this posterior's predictive under-dispersed. The measurements behind both
are in the README's "Measured" section."""


def options_per_method(specs: list[tuple[str, str | None]], options: dict[str, Any]) -> list[dict[str, Any]]:
    """Give each method the options it takes; refuse an option that no chosen method takes."""
    accepted = [set(METHODS.get(method).options.names()) for method, _ in specs]
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


def fit_or_reuse(model, dataset, specs, routed, kept: FinishedFits, command: str) -> list:
    """Each fit of ``compare``: reused from ``kept`` when an earlier run of the same ``command`` finished it, else run
    and kept there as soon as it finishes. Ctrl-C or SIGTERM (a Markov-chain, MC dropout or ensemble fit returns
    ``incomplete``) ends the loop with ``KeyboardInterrupt`` naming what was kept and how to go on."""
    fits = []
    try:
        for index, ((method, _), options) in enumerate(zip(specs, routed)):
            posterior = kept.load(index, method)
            if posterior is not None:
                print(f"reusing the finished {method} fit of an earlier run of this command: {kept.path(index, method)}")
            else:
                posterior = fit(model, dataset, method, **options)
                if posterior.record.interrupted is not None:
                    raise KeyboardInterrupt(f"{method}: {posterior.record.interrupted}")
                kept.save(index, method, posterior)
            fits.append(posterior)
    except KeyboardInterrupt as error:
        raise KeyboardInterrupt(compare_interrupted(str(error) or "SIGINT", kept, command)) from None
    return fits


def compare_interrupted(reason: str, kept: FinishedFits, command: str) -> str:
    """What an interrupted ``compare`` says: why, which finished fits are on disk, and the command that reuses them."""
    saved = [path.name for path in kept.saved()]
    if not saved:
        return f"compare stopped ({reason}) before any fit finished; nothing was kept"
    return (f"compare stopped ({reason}); the finished fits {', '.join(saved)} are kept in {kept.folder}: run the same "
            f"command again to reuse them: {command}")


def run_compare(args: argparse.Namespace) -> pd.DataFrame:
    """Fit every method on the same model and data, then write the comparison report into ``--out``.

    Each finished fit is kept on disk at once (:class:`~bnn.inference.evaluation.finished_fits.FinishedFits`) and a
    rerun of the same command reuses it; ``--out`` appears complete or not at all. Before any fit, each method's cost
    is estimated and printed, and ``--time-budget`` lowers draws and steps or leaves methods out
    (:mod:`bnn.inference.evaluation.time_budget`); a rerun under a budget may choose other draws, and then refits.
    """
    check_apart(args.out, {"--uci-dir": args.uci_dir})  # all found before minutes of fitting
    check_replaceable(args.out, overwrite=args.overwrite)
    check_writable(args.out)
    with sigterm_as_keyboard_interrupt():  # SIGTERM ends the command as Ctrl-C does: status 130, saying what was kept
        dataset = load_dataset(args.dataset, uci_dir=args.uci_dir, split=uci_split(args), seed=args.seed)
        model = build_model(args, dataset)
        specs = method_specs(args.methods)
        routed = options_per_method(specs, fit_options(args))
        choices = choose_fits(model, dataset, [method for method, _ in specs], routed, args.time_budget)
        cost_notes = cost_lines(choices, args.time_budget)
        print("\n".join(cost_notes))
        if all(choice.skipped for choice in choices):
            raise ValueError(f"no method fits in --time-budget {format_seconds(args.time_budget)}: raise it, or ask for "
                             "fewer draws or steps (see the estimates above)")
        specs = [spec for spec, choice in zip(specs, choices) if not choice.skipped]
        routed = [choice.options for choice in choices if not choice.skipped]
        methods = [method for method, _ in specs]
        kept = FinishedFits(args.out, run_fingerprint(model, dataset, list(zip(methods, routed))))
        posteriors = label_fits(fit_or_reuse(model, dataset, specs, routed, kept, command_line(args)))
        try:
            table = write_comparison(posteriors, dataset, args.out, command=command_line(args), overwrite=args.overwrite,
                                     progress=not args.quiet, cost_notes=cost_notes)
        except KeyboardInterrupt as error:
            reason = f"{str(error) or 'SIGINT'} while writing the report"
            raise KeyboardInterrupt(compare_interrupted(reason, kept, command_line(args))) from None
    kept.discard()
    with pd.option_context("display.width", 200, "display.max_columns", 12):
        print(table.T.to_string())
    print("\n".join(line.replace("**", "") for line in table.attrs["warnings"]))
    print(f"report: {Path(args.out) / 'report.md'}")
    return table


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``bnn``: subcommands ``fit`` and ``compare``, choices from the registries.

    Returns
    -------
    argparse.ArgumentParser
        Parsed arguments carry ``run``, the function of the chosen subcommand.
    """
    parser = argparse.ArgumentParser(prog="bnn", description=__doc__)
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
    compare_parser.add_argument("--time-budget", type=_duration, metavar="DURATION",
                                help="for example 90s, 10m, 1h30m: lower draws and steps, or leave a method out, to fit "
                                "within it by each method's cost, estimated (and printed) before any fit")
    compare_parser.set_defaults(run=run_compare)
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
        parser.exit(130, interrupted_message(args, error) + "\n")
    return 0
