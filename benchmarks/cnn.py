r"""Every method on the Bayesian CNN beside the plain MLP, on the image-like data sets ``digits`` and ``mnist1d``.

Each method is fitted as ``bnn compare`` fits it (its compare defaults; further ``compare`` flags after ``--``) on the
data set's training split, once with ``--model cnn`` and once with ``--model mlp``, and scored on its test split:
accuracy, mean test log-likelihood, the seconds of the fit and the method's own check
(:func:`benchmarks.training_cost.check`: ``passed``, ``no check``, what failed, or the refusal of a method that cannot
fit the network). NUTS is estimated
first (:func:`~bnn.inference.evaluation.cost.estimate_cost`) and left out, with its estimate, where that exceeds
``--max-nuts-seconds``. One Markdown row per fit, printed as it finishes.

Usage::

    python -m benchmarks.cnn --dataset digits [--models cnn,mlp] [--methods map,laplace,svi] [-- --map-steps 500]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from bnn.datasets import load_dataset
from bnn.inference import METHODS, fit
from bnn.inference.evaluation import evaluate
from bnn.inference.evaluation.cost import estimate_cost
from bnn.inference.fit import prepare_data

from benchmarks.provenance import read_rows
from benchmarks.training_cost import check
from bnn.cli.arguments import build_model, fit_options
from bnn.cli.main import build_parser
from bnn.experiments.comparison.run import method_specs, options_per_method

COLUMNS = ("model", "method", "accuracy", "test_ll", "fit_s", "own check")


def fit_row(model, dataset, method: str, options: dict, max_nuts_seconds: float) -> dict:
    """One fit's row: its scores and check, or why it was not run."""
    if method == "nuts":
        x, y = prepare_data(model, dataset)
        estimate = estimate_cost(method, METHODS.get(method).parse(options, model), model, x, y, {})
        if estimate.seconds > max_nuts_seconds:
            return {"own check": f"not run: estimated {estimate.describe()}"}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failed check is reported in the row, from the record
            posterior = fit(model, dataset, method, **options)
    except ValueError as refusal:
        return {"own check": f"refused: {refusal}"}
    seconds = time.perf_counter() - start
    metrics = evaluate(posterior, dataset)
    return {"accuracy": metrics["test_accuracy"], "test_ll": metrics["test_ll"], "fit_s": seconds,
            "own check": check(posterior)}


def cell(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


TABLE_HEADER = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)


def table_row(row: dict) -> str:
    """One fit's row: its model, method, scores, seconds and own check (blank where it was not run)."""
    return "| " + " | ".join(cell(row.get(column, "")) for column in COLUMNS) + " |"


def tables_from_csv(path: Path) -> str:
    """The tables of one or more runs from a CSV of their rows alone: a ``table`` column (each table's heading), then
    :data:`COLUMNS`."""
    rows = read_rows(path)
    parts = []
    for title in dict.fromkeys(row["table"] for row in rows):
        lines = [TABLE_HEADER, *(table_row(row) for row in rows if row["table"] == title)]
        parts.append(f"## {title}\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cnn", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="digits", help="a built-in data set (digits, mnist1d, ...)")
    parser.add_argument("--models", default="cnn,mlp", help="comma-separated --model values")
    parser.add_argument("--methods", default="map,laplace,svi,ensemble,mc-dropout,sgld,sghmc,nuts",
                        help="comma-separated methods")
    parser.add_argument("--seed", type=int, default=0, help="the data's and the fits' seed")
    parser.add_argument("--max-nuts-seconds", type=float, default=1800.0,
                        help="leave NUTS out where its estimate exceeds this (default 1800)")
    parser.add_argument("compare", nargs="*", help="bnn compare's flags, after --")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset, seed=args.seed)
    print(f"{args.dataset}: {len(dataset.x_train)} training rows, {len(dataset.x_test)} test rows, input shape "
          f"{dataset.input_shape}\n")
    print(TABLE_HEADER, flush=True)
    rows = []
    for model_name in args.models.split(","):
        command = build_parser().parse_args(["compare", "--dataset", args.dataset, "--model", model_name, "--quiet",
                                             "--seed", str(args.seed), "--methods", args.methods, *args.compare])
        model = build_model(command, dataset)
        specs = method_specs(command.methods)
        for (method, _), options in zip(specs, options_per_method(specs, fit_options(command))):
            row = {"model": model_name, "method": method,
                   **fit_row(model, dataset, method, options, args.max_nuts_seconds)}
            rows.append(row)
            print(table_row(row), flush=True)
    return rows


if __name__ == "__main__":
    main()
