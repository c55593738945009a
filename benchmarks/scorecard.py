r"""The scorecard of every method on a built-in data set: accuracy, calibration, out-of-distribution detection,
selective prediction and conformal coverage, side by side.

The training split is cut in two, seeded: 80% to fit, 20% to calibrate the conformal predictor
(:mod:`bnn.inference.evaluation.conformal`), never the test split. Each method is fitted as ``bnn compare`` fits it
(its compare defaults; further ``compare`` flags after ``--``) on the 80%, then scored on the test split
(:func:`~bnn.inference.evaluation.metrics.evaluate`), on the data set's shift set (:mod:`bnn.inference.evaluation.ood`:
``--ood``, by default ``gap`` for toy1d and ``farthest`` otherwise; ``held-out-classes`` takes its classes out of
the data before the cut) and by its conformal predictor at 90%. One Markdown row per method; with
``--figures DIR`` the reliability diagrams (classification) or PIT histograms (regression) of every fit are drawn
there.

Usage::

    python -m benchmarks.scorecard --dataset breast_cancer [--methods map,laplace,svi] [--ood SHIFT] [--figures DIR] \
        [-- --hidden 20]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import pandas as pd
from bnn.datasets import load_dataset
from bnn.inference import fit
from bnn.inference.evaluation import evaluate
from bnn.inference.evaluation.calibration_plots import plot_pit, plot_reliability
from bnn.inference.evaluation.ood import auroc_columns, ood_table
from bnn.inference.evaluation.set_coverage import carve_calibration_with_shift, set_coverage
from bnn.inference.evaluation.shift_sets import SHIFT_SETS, ShiftSplit, shift_split

from bnn.cli.arguments import build_model, fit_options
from bnn.cli.main import build_parser
from bnn.experiments.comparison.run import method_specs, options_per_method

CALIBRATION_SHARE = 0.2
ALPHA = 0.1
REGRESSION = ["rmse", "test_ll", "crps", "pit_calibration_error", "coverage_90", "width_90", "ood_auroc_total",
              "ood_auroc_epistemic", "aurc", "conformal_coverage", "conformal_width", "fit_s"]
CLASSIFICATION = ["accuracy", "test_ll", "brier", "ece", "ece_mass", "mutual_information", "ood_auroc_total",
                  "ood_auroc_epistemic", "aurc", "conformal_coverage", "conformal_set_size", "fit_s"]


def score(label: str, posterior, dataset, calibration, shift: ShiftSplit) -> dict[str, float]:
    """One row of the scorecard."""
    metrics = evaluate(posterior, dataset)
    renamed = {"rmse": metrics.get("test_rmse"), "accuracy": metrics.get("test_accuracy")}
    return {**metrics, **renamed, **auroc_columns(ood_table({label: posterior}, shift), label, dataset.task),
            **set_coverage(posterior, dataset, calibration, alpha=ALPHA)}


def table_header(columns: list[str]) -> str:
    """The header of the scorecard's table: a row per method, a column per score."""
    return "| method | " + " | ".join(columns) + " |\n|" + "---|" * (len(columns) + 1)


def table_row(method: str, row: dict[str, float], columns: list[str]) -> str:
    """One method's row of the scorecard."""
    return f"| {method} | " + " | ".join(f"{row[c]:.4g}" for c in columns) + " |"


def tables_from_csv(path: Path) -> str:
    """The scorecard's tables from a CSV of their rows alone: a ``table`` column (each table's heading), ``method``
    (the row's label), then the scores (a table's columns: those of the data set's task that its rows hold)."""
    parts = []
    for title, rows in pd.read_csv(path, dtype=str, keep_default_na=False).groupby("table", sort=False):
        columns = [c for c in (REGRESSION if (rows["rmse"] != "").any() else CLASSIFICATION) if (rows[c] != "").any()]
        lines = [table_header(columns)]
        lines += [table_row(row["method"], {c: float(row[c]) for c in columns}, columns) for row in rows.to_dict("records")]
        parts.append(f"## {title}\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scorecard", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="breast_cancer", help="a built-in data set (breast_cancer, toy1d, ...)")
    parser.add_argument("--methods", default="map,laplace,svi,ensemble,mc-dropout,sgld", help="comma-separated methods")
    parser.add_argument("--seed", type=int, default=0, help="the data's, the cut's and the fits' seed")
    parser.add_argument("--ood", choices=SHIFT_SETS.names(), metavar="SHIFT",
                        help="the shift set (default gap for toy1d, farthest otherwise)")
    parser.add_argument("--figures", type=Path, help="a folder for the reliability diagrams or PIT histograms")
    parser.add_argument("compare", nargs="*", help="bnn compare's flags, after --")
    args = parser.parse_args(argv)
    command = build_parser().parse_args(["compare", "--dataset", args.dataset, "--quiet", "--seed", str(args.seed),
                                         "--methods", args.methods, *args.compare])
    name = args.ood or ("gap" if args.dataset == "toy1d" else "farthest")
    loaded = load_dataset(args.dataset, seed=args.seed)
    dataset, calibration, shift = carve_calibration_with_shift(loaded, shift_split(loaded, name), CALIBRATION_SHARE,
                                                               args.seed)
    model = build_model(command, dataset)
    specs = method_specs(command.methods)
    columns = REGRESSION if dataset.task == "regression" else CLASSIFICATION
    print(f"{args.dataset}: {len(dataset.x_train)} training rows fitted, {len(calibration[0])} for conformal "
          f"calibration, {len(dataset.x_test)} test rows; shift set {name}; conformal at {1 - ALPHA:.0%}\n")
    print(table_header(columns), flush=True)
    rows, fits = {}, {}
    for (method, _), options in zip(specs, options_per_method(specs, fit_options(command))):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the scorecard is about the scores; each fit's checks are the report's
            posterior = fit(model, dataset, method, **options)
        seconds = time.perf_counter() - start
        rows[method] = {**score(method, posterior, dataset, calibration, shift), "fit_s": seconds}
        fits[method] = posterior
        print(table_row(method, rows[method], columns), flush=True)
    if args.figures is not None:
        args.figures.mkdir(parents=True, exist_ok=True)
        plot = plot_pit if dataset.task == "regression" else plot_reliability
        print(f"\nfigure: {plot(fits, dataset, args.figures / f'{args.dataset}.png')}")
    return rows


if __name__ == "__main__":
    main()
