"""MC dropout's own check, measured on healthy and on broken fits of the built-in data.

The check (:mod:`bnn.inference.mc_dropout.record`) flags a run whose objective gains more than ``GAIN_LIMIT`` nats per
example from the second-last tenth of its steps to the last, and more than its noise allows. This fits MC dropout on
each data set's network (``benchmarks.training_cost.build_network``) from three seeds in four variants: at the
defaults (the default length, run on while the objective gains) and at twice the default length (healthy), at a
hundredth of the default rate and at a tenth of the default length (broken: too slow, too short), the last three at a
length given, so not run on. Each fit's row holds its steps, its gain and the gain's standard errors, its verdict, its
test scores and its time (kept in the CSV, not tabled: the fits are not a timing run); the limit should lie above
every healthy fit's gain, and every broken fit should cross it.

Usage::

    python -m benchmarks.mc_dropout_check --dataset digits --model cnn [--seeds 3] [--variants defaults,...]
    python -m benchmarks.mc_dropout_check --dataset protein-tertiary-structure --uci-dir UCI_DIR
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
from bnn.inference import fit
from bnn.inference.core.objective_trend import RISE_Z
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.mc_dropout.options import MCDropoutOptions
from bnn.inference.mc_dropout.record import GAIN_LIMIT

from benchmarks.check_runs import check_parser, keep_row, listed, parse_check_run, with_runs
from bnn.runtime.workers import fit_threads

CSV = Path(__file__).parent / "results" / "map_check" / "mc_dropout.csv"
VARIANTS = {"defaults": None, "twice the length": (2.0, 1.0), "a hundredth of the rate": (1.0, 0.01),
            "a tenth of the length": (0.1, 1.0)}
"""Each variant's multiples of the default length and of the default rate (``None``: the defaults, run on while the
objective gains)."""
COLUMNS = ["dataset", "model", "variant", "seed", "steps", "lr", "gain", "z", "converged", "seconds", "accuracy",
           "rmse", "test_ll", "command", "commit", "machine", "date"]


def variant_options(variant: str, length: int) -> dict[str, Any]:
    """The options of ``variant`` (:data:`VARIANTS`) on data whose default length is ``length`` steps."""
    if VARIANTS[variant] is None:
        return {}
    length_share, rate_share = VARIANTS[variant]
    return {"steps": max(1, round(length_share * length)), "lr": rate_share * MCDropoutOptions.lr}


def check_row(dataset, architecture: str, variant: str, seed: int, posterior, seconds: float,
              header: dict[str, str]) -> dict[str, Any]:
    """One fit's row (module notes)."""
    metrics, record = evaluate(posterior, dataset), posterior.record
    trend = record.trend
    gain, z = (math.nan, math.nan) if trend is None else (trend.gain, trend.gain / trend.standard_error)
    return {"dataset": dataset.name, "model": architecture, "variant": variant, "seed": seed,
            "steps": record.steps_done, "lr": record.options.lr, "gain": gain, "z": z, "converged": record.converged,
            "seconds": seconds, "accuracy": metrics.get("test_accuracy", math.nan),
            "rmse": metrics.get("test_rmse", math.nan), "test_ll": metrics["test_ll"], **header}


def tables_from_csv(path: Path) -> str:
    """The table of MC dropout's check: per data set and variant, its fits' steps, gains, standard errors (by seed),
    how many pass at the current lines (:data:`GAIN_LIMIT`, :data:`RISE_Z`; the CSV's ``converged`` is the verdict at
    the run's) and their test log-likelihoods; then the run lines."""
    frame = pd.read_csv(path, dtype={"command": str, "commit": str, "machine": str, "date": str})
    passes = ~((frame["gain"] > GAIN_LIMIT) & (frame["z"] > RISE_Z))
    lines = ["MC dropout", "", "| data set | variant | steps | rate | gains (nats) | standard errors | pass | test LL |",
             "|---|---|---|---|---|---|---|---|"]
    for (dataset, variant), rows in frame.groupby(["dataset", "variant"], sort=False):
        steps = ", ".join(str(int(value)) for value in rows["steps"].unique())
        lines.append(f"| {dataset} | {variant} | {steps} | {rows['lr'].iloc[0]:g} | {listed(rows['gain'], '.3f')} "
                     f"| {listed(rows['z'], '.1f')} | {int(passes[rows.index].sum())} of {len(rows)} "
                     f"| {listed(rows['test_ll'], '.3f')} |")
    return with_runs("\n".join(lines), frame)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = check_parser("benchmarks.mc_dropout_check", __doc__, VARIANTS, CSV)
    parser.add_argument("--seeds", type=int, default=3, help="fits per variant, seeds 0, 1, ...")
    args, variants, dataset, architecture, model, header = parse_check_run(parser, VARIANTS, argv)
    length = MCDropoutOptions.parse("mc-dropout", {}).training_steps(dataset.x_train.shape[0])
    rows = []
    for variant in variants:
        for seed in range(args.seeds):
            began = time.perf_counter()
            with fit_threads(), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)  # the row holds the verdict
                posterior = fit(model, dataset, "mc-dropout", seed=seed, progress=False,
                                **variant_options(variant, length))
            row = check_row(dataset, architecture, variant, seed, posterior, time.perf_counter() - began, header)
            table = keep_row(rows, row, COLUMNS, args.csv,
                             f"mc_dropout_check variant={variant!r} seed={seed} steps={row['steps']} gain={row['gain']:.4f} "
                             f"z={row['z']:.1f} test_ll={row['test_ll']:.4f} seconds={row['seconds']:.1f}")
    return table


if __name__ == "__main__":
    main()
