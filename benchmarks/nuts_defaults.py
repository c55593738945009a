r"""NUTS defaults: which warm-up, draws, chains, start and target acceptance make the BNN's chains converge.

Every setting of a small grid runs ``fit(model, data, "nuts", ...)`` on the model ``bnn compare`` builds by
default (d-50-1 tanh, :math:`\mathcal{N}(0, 1)` weights, learned noise), once per seed of ``--seeds`` (the seed of the
fit and of the built-in data, as ``bnn compare --seed`` sets both), and the table gives
what :mod:`bnn.inference.diagnostics.convergence` judges: the largest split :math:`\hat{R}` over the weights (large by the
hidden units' permutation symmetry, shown for completeness), the predictive :math:`\hat{R}` of
:math:`f(x_i)` at the training inputs (the check that matters), divergences, the smallest bulk ESS over the
weights and over :math:`f(x_i)`, the mean tree depth, the gradient evaluations, the wall time and the verdict.

Usage::

    python -m benchmarks.nuts_defaults [--dataset toy1d] [--uci-dir UCI_DIR --split 0] [--seeds 0-9]
        [--settings "num_warmup=200;num_warmup=500,init=map"]

``--settings`` lists settings separated by ``;``, each a comma-separated ``option=value`` list of
:class:`~bnn.inference.nuts.NUTSOptions` (empty: ``fit``'s defaults). One Markdown row per setting and seed is
printed as soon as it finishes, and after each setting's seeds the number of them that converged.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
import torch
from bnn.datasets import load_dataset
from bnn.inference import fit
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.models import BayesianMLP

from benchmarks.provenance import printed_table, table_header

DEFAULT_SETTINGS = ";".join([
    "num_warmup=400,num_samples=400,target_accept=0.8",  # the defaults before 300 + 700 at 0.9
    "num_warmup=300,num_samples=500",
    "",  # fit's defaults
])
COLUMNS = ["setting", "seed", "max R-hat (weights)", "predictive R-hat", "divergences", "min bulk ESS (weights)",
           "min bulk ESS f(x)", "mean tree depth", "gradients", "wall s", "converged"]


def parse_setting(text: str) -> dict[str, object]:
    """``"num_warmup=500,init=map"`` as fit's keyword arguments (numbers parsed, the rest kept as text)."""
    options: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        try:
            options[name] = int(value)
        except ValueError:
            try:
                options[name] = float(value)
            except ValueError:
                options[name] = value
    return options


def default_model(in_features: int) -> BayesianMLP:
    """The network ``bnn compare`` builds by default for a regression set with ``in_features`` inputs."""
    return BayesianMLP(in_features, 1, hidden=(50,), activation="tanh", prior={"name": "gaussian"},
                       likelihood={"name": "gaussian", "scale": None})


def predictive_ess(posterior, x: torch.Tensor) -> float:
    """The smallest bulk ESS of the network output :math:`f(x_i)` over the inputs ``x``."""
    draws = posterior.samples
    chains, count = next(iter(draws.values())).shape[:2]
    flat = {name: value.reshape(chains * count, *value.shape[2:]) for name, value in draws.items()}
    with torch.no_grad():
        f = posterior.model.forward(x, flat).reshape(chains, count, -1).numpy()
    return float(np.min(az.ess(az.convert_to_dataset({"f": f}), method="bulk")["f"].values))


def seeds(text: str) -> list[int]:
    """``"0-9"`` or ``"0,3,5"`` (or both, comma-separated) as the list of seeds."""
    found: list[int] = []
    for part in filter(None, (item.strip() for item in text.split(","))):
        first, _, last = part.partition("-")
        found.extend(range(int(first), int(last or first) + 1))
    return found


def row(setting: str, seed: int, model: BayesianMLP, x: torch.Tensor, y: torch.Tensor) -> tuple[list[str], bool]:
    """One table row, the run of ``fit`` with ``setting`` from ``seed`` and its checks, and whether it converged."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the table says it
        posterior = fit(model, (x, y), "nuts", progress=False, **{"seed": seed, **parse_setting(setting)})
    seconds = time.perf_counter() - start
    found = posterior.record.diagnostics
    depth = float(np.mean(posterior.sample_stats["tree_depth"]))
    cells = [setting or "fit's defaults", str(seed), f"{found.r_hat_max:.3f}", f"{found.r_hat_predictive:.4f}",
             str(found.divergences), f"{found.ess_bulk_min:.0f}", f"{predictive_ess(posterior, x):.0f}", f"{depth:.1f}",
             str(posterior.record.gradient_evaluations), f"{seconds:.0f}", "yes" if found.converged else "no"]
    return cells, found.converged


def tables_from_csv(path: Path) -> str:
    """The table of a run from a CSV of its rows alone, every cell as printed (the columns :data:`COLUMNS`)."""
    return printed_table(path, COLUMNS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nuts_defaults", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="toy1d")
    parser.add_argument("--uci-dir")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--seeds", type=seeds, default=[0], help="for example 0-9: the fits' and the data's seeds")
    parser.add_argument("--settings", default=DEFAULT_SETTINGS)
    args = parser.parse_args(argv)
    datasets = {seed: load_dataset(args.dataset, uci_dir=args.uci_dir, split=args.split, seed=seed)
                for seed in args.seeds}
    first = datasets[args.seeds[0]]
    model = default_model(first.in_features)
    print(f"{args.dataset} (split {args.split}): N = {len(first.x_train)}, {first.in_features} inputs", flush=True)
    print(table_header(COLUMNS), flush=True)
    for setting in args.settings.split(";"):
        label, converged = setting or "fit's defaults", 0
        for seed, dataset in datasets.items():
            cells, passed = row(setting, seed, model, dataset.x_train, dataset.y_train)
            converged += passed
            print("| " + " | ".join(cells) + " |", flush=True)
        print(f"{label}: {converged} of {len(datasets)} seeds converged", flush=True)


if __name__ == "__main__":
    main()
