"""The options ``fit`` and ``compare`` share: the data, the model, and the methods' fit options."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from bnn.datasets import DATASETS
from bnn.guides import GUIDES
from bnn.inference.ensemble.options import MemberMethod
from bnn.inference.evaluation.time_budget import parse_duration
from bnn.inference.laplace.curvature import HessianType, Structure
from bnn.inference.map import Objective
from bnn.inference.nuts import ChainMethod, Engine, InitStrategy
from bnn.inference.sgmcmc import Preconditioner, StepSchedule
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.models import ACTIVATIONS, LIKELIHOODS, PRIORS, BayesianMLP, get_likelihood

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
    """Inference options; each is forwarded only when given."""
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


def command_line(args: argparse.Namespace) -> str:
    """The command that made the run, quoted so that a shell runs it again."""
    return shlex.join(["bnn", *args.argv])
