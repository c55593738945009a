"""How far each approximation's predictive lies from a converged NUTS reference on the same model and data.

Usage::

    python -m benchmarks.fidelity --case toy1d [--fits laplace,svi,svi:full,...] [--uci-dir UCI_DIR]

For a case (a data set, its split and a network), the reference is NUTS with :data:`REFERENCE_OPTIONS` (four chains
or more, pooled) on the case's network; it must pass its own check at the test inputs
(:func:`~bnn.inference.evaluation.fidelity.reference_problems`: split R-hat of f(x) at most 1.01, bulk ESS at least
400, no divergence). It is saved under ``benchmarks/results/fidelity/<case>/reference`` (a folder ``bnn compare
--reference PATH`` reads) and read back, not refitted, on a later run. A network that is Bayesian in its last layer
only (``from_module(..., bayesian="last-layer")``) has its other weights fitted at the MAP by the reference's fit
(:mod:`bnn.inference.core.point_parameters`); every other fit of the case is of the reference's network with those
values, so that all of them approximate the same posterior. Then each fit of ``--fits`` (a method, or
``method:variant`` from :data:`FITS`) runs at ``compare``'s defaults for its method with the variant's options, and
its row holds its distance from the reference at the test inputs
(:func:`~bnn.inference.evaluation.fidelity.fidelity`: agreement and total variation for classifiers, 2-Wasserstein
and the ratio of predictive standard deviations for regression, each with its jackknife standard error), its test
log-likelihood and its seconds. The rows go into ``fidelity/results.csv`` (a run replaces its case's rows of the
same fits), from which :func:`tables_from_csv` makes ``fidelity.md``'s tables.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import torch
from bnn.datasets import load_dataset
from bnn.datasets.dataset import Dataset
from bnn.inference import METHODS, Posterior, fit
from bnn.inference.evaluation.fidelity import CLASSIFIER_COLUMNS, REGRESSION_COLUMNS, fidelity, reference_problems
from bnn.inference.evaluation.metrics import evaluate
from bnn.models import BayesianNetwork, from_module
from torch import nn

from benchmarks.provenance import merged_rows, run_header, run_lines
from benchmarks.training_cost import build_network, check
from bnn.experiments.comparison.reference import saved_reference
from bnn.experiments.uci.protocol import LEARNED_NOISE, uci_model
from bnn.runtime.atomic import atomic_file

RESULTS = Path(__file__).parent / "results" / "fidelity"
CSV = RESULTS / "results.csv"
REFERENCE_OPTIONS = {"num_chains": 4}
"""The reference's NUTS options over its defaults (300 warmup draws a chain, target acceptance 0.9, chains started at
their own MAP points); its kept draws a chain are the case's :attr:`Case.draws`."""
SAVED_BYTES = 4_000_000
"""The most bytes of draws a saved reference holds (the repository keeps files under 5 MB): every k-th draw of each
chain, the smallest k that fits; its log-likelihood is not saved (:meth:`Posterior.load` remakes it)."""
FITS: dict[str, tuple[str, dict[str, Any]]] = {
    "map": ("map", {}),
    "laplace": ("laplace", {}),
    "laplace:full": ("laplace", {"structure": "full"}),
    "laplace:diag": ("laplace", {"structure": "diag"}),
    "laplace:kron": ("laplace", {"structure": "kron"}),
    "laplace:bridge": ("laplace", {"link_approx": "bridge"}),
    "laplace:subnetwork-50": ("laplace", {"structure": "subnetwork", "subnetwork_size": 50}),
    "svi": ("svi", {}),
    "svi:lowrank": ("svi", {"guide": "lowrank"}),
    "svi:full": ("svi", {"guide": "full"}),
    "svi:flow": ("svi", {"guide": "flow"}),
    "svgd": ("svgd", {}),
    "ivon": ("ivon", {}),
    "swag": ("swag", {}),
    "ensemble": ("ensemble", {}),
    "sgld": ("sgld", {}),
    "sghmc": ("sghmc", {}),
    "mc-dropout": ("mc-dropout", {}),
}
"""A fit's name -> its method and the options that make the variant (over ``compare``'s defaults for the method)."""
COLUMNS = ["case", "fit", "seconds", "test_ll", "check", *REGRESSION_COLUMNS, *CLASSIFIER_COLUMNS,
           "command", "commit", "machine", "date"]
REFERENCE = "nuts (reference)"
REFUSED = "refused as a reference"


class Case(NamedTuple):
    """A data set and the network every fit of the case approximates the posterior of."""

    description: str
    dataset: Callable[[Path | None], Dataset]
    network: Callable[[Dataset], BayesianNetwork]
    draws: int = 700
    """The reference's kept draws a chain (NUTS's default): more where the draws that fit in :data:`SAVED_BYTES`
    fail the check."""


def _uci(name: str) -> Callable[[Path | None], Dataset]:
    def load(uci_dir: Path | None) -> Dataset:
        if uci_dir is None:
            raise ValueError(f"case {name!r} reads the UCI benchmark: give --uci-dir")
        return load_dataset(name, uci_dir=uci_dir, split=0)
    return load


def _uci_last_layer(name: str) -> Callable[[Dataset], BayesianNetwork]:
    """The UCI grid's network (one hidden layer of ReLU units, a learned noise) as a torch module, Bayesian in its
    output layer."""
    def network(dataset: Dataset) -> BayesianNetwork:
        torch.manual_seed(0)
        hidden = 50 if name != "protein-tertiary-structure" else 100
        module = nn.Sequential(nn.Linear(dataset.in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        return from_module(module, likelihood=LEARNED_NOISE, bayesian="last-layer")
    return network


def _digits_cnn_last_layer(dataset: Dataset) -> BayesianNetwork:
    """Two convolution blocks (8 and 16 channels of 3x3, SiLU, 2x2 average pooling) and a linear read-out of their
    64 features to the ten classes: Bayesian in the read-out."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Unflatten(1, (1, 8, 8)), nn.Conv2d(1, 8, 3, padding=1), nn.SiLU(), nn.AvgPool2d(2),
                           nn.Conv2d(8, 16, 3, padding=1), nn.SiLU(), nn.AvgPool2d(2), nn.Flatten(),
                           nn.Linear(64, dataset.out_features))
    return from_module(module, likelihood=dataset.likelihood_name, bayesian="last-layer",
                       in_features=dataset.in_features)


def _built_in(name: str) -> Callable[[Path | None], Dataset]:
    return lambda uci_dir: load_dataset(name)


CASES: dict[str, Case] = {
    "toy1d": Case("toy1d, the main job's 1-50-1 tanh network", _built_in("toy1d"),
                  lambda dataset: build_network(dataset, "mlp", None)),
    "yacht": Case("yacht split 0, the UCI grid's network (50 ReLU units, learned noise)", _uci("yacht"),
                  lambda dataset: uci_model(dataset.in_features, 50)),
    "yacht-last-layer": Case("yacht split 0, the UCI grid's network Bayesian in its output layer", _uci("yacht"),
                             _uci_last_layer("yacht")),
    "bostonHousing": Case("Boston split 0, the UCI grid's network (50 ReLU units, learned noise)",
                          _uci("bostonHousing"), lambda dataset: uci_model(dataset.in_features, 50)),
    "bostonHousing-last-layer": Case("Boston split 0, the UCI grid's network Bayesian in its output layer",
                                     _uci("bostonHousing"), _uci_last_layer("bostonHousing")),
    "breast_cancer": Case("breast cancer, a 30-50-1 tanh network", _built_in("breast_cancer"),
                          lambda dataset: build_network(dataset, "mlp", None)),
    "breast_cancer-narrow": Case("breast cancer, a 30-10-1 tanh network", _built_in("breast_cancer"),
                                 lambda dataset: build_network(dataset, "mlp", None, hidden=(10,))),
    "digits-cnn-last-layer": Case("digits, a CNN (8 and 16 channels, 64 features) Bayesian in its read-out",
                                  _built_in("digits"), _digits_cnn_last_layer, draws=1400),
}


def reference_posterior(case: Case, dataset: Dataset, folder: Path, seed: int) -> tuple[Posterior, float, list[str]]:
    """The case's saved reference (checked as ``compare --reference PATH`` checks it), else NUTS fitted, checked and,
    where it passes, saved; its seconds (``nan`` for one read back: its row in the CSV keeps the fit's) and what keeps
    it from being a reference (empty where it passes)."""
    network = case.network(dataset)
    if (folder / "fit.json").is_file():
        return saved_reference(folder, network, dataset), math.nan, []
    began = time.perf_counter()
    reference = fit(network, dataset, "nuts", seed=seed, progress=False, num_samples=case.draws, **REFERENCE_OPTIONS)
    seconds = time.perf_counter() - began
    problems = reference_problems(reference, reference.predict(dataset.x_test).f)
    if not problems:
        every = math.ceil(sum(draws.nbytes for draws in reference.samples.values()) / SAVED_BYTES)
        kept = thinned(reference, every)
        kept_problems = reference_problems(kept, kept.predict(dataset.x_test).f) if every > 1 else []
        if kept_problems:
            print(f"the reference passes its check but is not saved: one draw in {every} (what fits in {SAVED_BYTES} "
                  f"bytes) fails it ({'; '.join(kept_problems)}); give the case more draws (Case.draws)", flush=True)
        else:
            kept.save(folder, log_likelihood=False)
    return reference, seconds, problems


def thinned(posterior: Posterior, every: int) -> Posterior:
    """``posterior`` with every ``every``-th draw of each chain (its sampler statistics alike)."""
    if every == 1:
        return posterior
    return Posterior(posterior.model, {name: draws[:, ::every] for name, draws in posterior.samples.items()},
                     posterior.x, posterior.y, posterior.record,
                     {name: np.asarray(stat)[:, ::every] for name, stat in posterior.sample_stats.items()})


def fit_row(case: str, name: str, posterior: Posterior, seconds: float, dataset: Dataset,
            distances: pd.Series | None, header: dict[str, str]) -> dict[str, Any]:
    """One fit's row: seconds, test LL, its own check and its distances (none for the reference)."""
    row = {"case": case, "fit": name, "seconds": seconds, "test_ll": evaluate(posterior, dataset)["test_ll"],
           "check": check(posterior), **header}
    if distances is not None:
        row.update(distances.to_dict())
    return row


def merged(rows: list[dict[str, Any]], path: Path) -> pd.DataFrame:
    """The CSV at ``path`` with ``rows`` in place of its rows of the same case and fit."""
    return merged_rows(rows, COLUMNS, path, ("case", "fit"))


def _written(rows: list[dict[str, Any]], path: Path) -> None:
    """Print the last row and merge the run's rows so far into the CSV (a run stopped halfway keeps its fits)."""
    row = rows[-1]
    print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                   for key, value in row.items() if key in COLUMNS[:13] and value == value), flush=True)
    table = merged(rows, path)
    with atomic_file(path) as handle:
        table.to_csv(handle, index=False)


def _estimate(row: dict[str, Any], column: str) -> str:
    value, error = row[column], row.get(f"{column}_se", math.nan)
    if isinstance(value, float) and math.isnan(value):
        return ""
    return f"{value:.4f} ± {error:.4f}" if not math.isnan(error) else f"{value:.4f}"


def _short(check: str) -> str:
    """A check's first clause (the CSV keeps it whole): what failed, and for a fit with no posterior or a refused
    reference, why."""
    head, _, rest = check.partition(": ")
    if head in ("no posterior", REFUSED):
        return f"{head}: {rest.split(': ')[0].split('; ')[0]}"
    return head


def _fit_order(row: dict[str, Any]) -> tuple[bool, int]:
    """The reference first, then the fits in :data:`FITS`'s order (a fit no longer in it last)."""
    order = list(FITS)
    return row["fit"] != REFERENCE, order.index(row["fit"]) if row["fit"] in order else len(order)


def tables_from_csv(path: Path) -> str:
    """``fidelity.md``'s tables from the CSV alone: per case each fit's distance from the reference with its standard
    error, its test LL, own check and seconds (the reference first, then the fits in :data:`FITS`'s order), and the
    run lines."""
    text = ["case", "fit", "check", "command", "commit", "machine", "date"]
    frame = pd.read_csv(path, dtype={column: str for column in text})
    frame[text] = frame[text].fillna("")
    rows = frame.to_dict("records")
    blocks, shown = [], []
    for case in dict.fromkeys(row["case"] for row in rows):
        group = sorted((row for row in rows if row["case"] == case), key=_fit_order)
        measures = (["wasserstein", "std_ratio"] if any(not math.isnan(row["wasserstein"]) for row in group) else
                    ["agreement", "total_variation"] if any(not math.isnan(row["agreement"]) for row in group) else [])
        lines = [f"{CASES[case].description if case in CASES else case}", "",
                 "| " + " | ".join(["fit", *measures, "test_ll", "check", "seconds"]) + " |",
                 "|" + "---|" * (len(measures) + 4)]
        for row in group:
            cells = [row["fit"], *(_estimate(row, column) for column in measures), f"{row['test_ll']:.4f}",
                     _short(row["check"]), f"{row['seconds']:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
        shown.extend(group)
        blocks.append(f"### {case}\n\n" + "\n".join(lines))
    return "\n\n".join(blocks) + "\n\nRuns:\n\n" + "\n".join(run_lines(shown)) + "\n"


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--fits", default="laplace,svi", help=f"comma-separated, from {sorted(FITS)}")
    parser.add_argument("--uci-dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the references' folders and results.csv")
    args = parser.parse_args(argv)
    names = [name for name in args.fits.split(",") if name]
    unknown = [name for name in names if name not in FITS]
    if unknown:
        raise SystemExit(f"unknown fit(s) {unknown}; choose from {sorted(FITS)}")
    case = CASES[args.case]
    dataset = case.dataset(args.uci_dir)
    header = run_header("benchmarks.fidelity", argv)
    csv = args.results / "results.csv"
    args.results.mkdir(parents=True, exist_ok=True)
    reference, seconds, problems = reference_posterior(case, dataset, args.results / args.case / "reference", args.seed)
    rows = []
    if not math.isnan(seconds):
        rows.append(fit_row(args.case, REFERENCE, reference, seconds, dataset, None, header))
        if problems:
            rows[-1]["check"] = f"{REFUSED}: {'; '.join(problems)}"
        _written(rows, csv)
    if problems:
        return merged(rows, csv)
    for name in names:
        method, variant = FITS[name]
        options = {**METHODS.get(method).compare_options, **variant}
        began = time.perf_counter()
        try:
            posterior = fit(reference.model, dataset, method, seed=args.seed, progress=False, **options)
        except ValueError as error:  # refused before any work, or stopped by a fit that broke: the row says why
            rows.append({"case": args.case, "fit": name, "seconds": math.nan, "test_ll": math.nan,
                         "check": f"no posterior: {error}", **header})
            _written(rows, csv)
            continue
        seconds = time.perf_counter() - began
        distances = fidelity(reference, {name: posterior}, dataset.x_test, seed=args.seed).loc[name]
        rows.append(fit_row(args.case, name, posterior, seconds, dataset, distances, header))
        _written(rows, csv)
    return merged(rows, csv)


if __name__ == "__main__":
    main()
