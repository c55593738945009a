"""The minibatch MAP's own check, measured on healthy and on broken fits of the built-in data it runs on.

The check (:mod:`bnn.inference.map_search.minibatch_map`) asks two things of a run: that its last window of a tenth
of its learning rate add at most a share of the run's rise
(:attr:`~bnn.inference.core.objective_trend.ObjectiveTrend.flat`), and that its full gradient at the end be at most a
fraction of one batch's gradient noise (:mod:`bnn.inference.map_search.gradient_noise`). This fits the MAP of each
data set's network (``benchmarks.training_cost.build_network``) from the starts of an ensemble's members
(``member_seeds(0, members)``) in four variants: at the defaults and at twice the default epochs (healthy), at a
hundredth of the default rate and at a tenth of the default epochs (broken: too slow, too short). Each fit's row holds
the share its last window added (``gain / rise``), its noise ratio, its verdict, its test scores and its time (kept in
the CSV, not tabled: the fits are not a timing run); each of the check's two lines should lie above every healthy
fit's value, and every broken fit should cross at least one.

Usage::

    python -m benchmarks.map_check --dataset mnist1d --model cnn [--members 5] [--variants defaults,...]
    python -m benchmarks.map_check --dataset protein-tertiary-structure --uci-dir UCI_DIR
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
from bnn.inference import fit
from bnn.inference.core.full_batch_work import BATCH_SIZE
from bnn.inference.core.objective_trend import FLAT_SHARE
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.map_search import map_estimate
from bnn.inference.map_search.gradient_noise import NOISE_RATIO
from bnn.inference.map_search.map_starts import member_seeds
from bnn.inference.map_search.minibatch_map import LR, MinibatchFit, minibatch_epochs, minibatch_map

from benchmarks.check_runs import check_parser, keep_row, listed, parse_check_run, with_runs
from bnn.runtime.workers import fit_threads

CSV = Path(__file__).parent / "results" / "map_check" / "results.csv"
VARIANTS = {"defaults": (1.0, 1.0), "twice the epochs": (2.0, 1.0), "a hundredth of the rate": (1.0, 0.01),
            "a tenth of the epochs": (0.1, 1.0)}
"""Each variant's multiples of the default epochs and of the default rate."""
COLUMNS = ["dataset", "model", "variant", "seed", "epochs", "batch_lr", "share", "gain", "rise", "flat", "noise_ratio",
           "converged", "seconds", "accuracy", "rmse", "test_ll", "command", "commit", "machine", "date"]


def map_fit(model, dataset, seed: int, epochs: int, batch_lr: float) -> tuple[Any, MinibatchFit]:
    """``fit(model, dataset, "map", ...)`` and the :class:`MinibatchFit` it ran."""
    runs = []

    def kept(*args, **kwargs):
        runs.append(minibatch_map(*args, **kwargs))
        return runs[-1]

    with mock.patch.object(map_estimate, "minibatch_map", kept):
        posterior = fit(model, dataset, "map", seed=seed, progress=False, map_epochs=epochs, map_batch_lr=batch_lr)
    if len(runs) != 1:
        raise RuntimeError(f"the MAP of {dataset.name} ran {len(runs)} minibatch fits, not one: is it fitted on "
                           "minibatches at all (large data or network)?")
    return posterior, runs[0]


def check_row(dataset, architecture: str, variant: str, seed: int, epochs: int, batch_lr: float, posterior,
              run: MinibatchFit, seconds: float, header: dict[str, str]) -> dict[str, Any]:
    """One fit's row (module notes)."""
    metrics, trend = evaluate(posterior, dataset), run.trend
    gain, rise = (math.nan, math.nan) if trend is None else (trend.gain, trend.rise)
    return {"dataset": dataset.name, "model": architecture, "variant": variant, "seed": seed, "epochs": epochs,
            "batch_lr": batch_lr, "share": gain / rise, "gain": gain, "rise": rise, "flat": run.flat,
            "noise_ratio": posterior.record.map_noise_ratio, "converged": posterior.record.converged, "seconds": seconds,
            "accuracy": metrics.get("test_accuracy", math.nan),
            "rmse": metrics.get("test_rmse", math.nan), "test_ll": metrics["test_ll"], **header}


def passes(rows: pd.DataFrame) -> pd.Series:
    """Whether each fit passes the check at the lines it has now (:data:`FLAT_SHARE`, :data:`NOISE_RATIO`; the CSV's
    ``converged`` is the verdict at the run's)."""
    return (rows["share"] <= FLAT_SHARE) & (rows["noise_ratio"] <= NOISE_RATIO)


def tables_from_csv(path: Path) -> str:
    """``map_check.md``'s tables: per data set and variant, the shares and noise ratios of its fits (by seed), how
    many pass the check (:func:`passes`) and their test log-likelihoods; then the run lines."""
    frame = pd.read_csv(path, dtype={"command": str, "commit": str, "machine": str, "date": str})
    blocks = []
    for (dataset, model), group in frame.groupby(["dataset", "model"], sort=False):
        lines = [f"{dataset}, {model}", "", "| variant | epochs | rate | shares (%) | noise ratios | pass | test LL |",
                 "|---|---|---|---|---|---|---|"]
        for variant, rows in group.groupby("variant", sort=False):
            lines.append(f"| {variant} | {rows['epochs'].iloc[0]} | {rows['batch_lr'].iloc[0]:g} "
                         f"| {listed(100 * rows['share'], '.2f')} | {listed(rows['noise_ratio'], '.3f')} "
                         f"| {int(passes(rows).sum())} of {len(rows)} | {listed(rows['test_ll'], '.3f')} |")
        blocks.append("\n".join(lines))
    return with_runs("\n\n".join(blocks), frame)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = check_parser("benchmarks.map_check", __doc__, VARIANTS, CSV)
    parser.add_argument("--members", type=int, default=5, help="the starts: an ensemble's first members")
    args, variants, dataset, architecture, model, header = parse_check_run(parser, VARIANTS, argv)
    default_epochs = minibatch_epochs(dataset.x_train.shape[0], BATCH_SIZE)
    rows = []
    for variant in variants:
        epoch_share, rate_share = VARIANTS[variant]
        epochs, batch_lr = max(1, round(epoch_share * default_epochs)), rate_share * LR
        for seed in member_seeds(0, args.members):
            began = time.perf_counter()
            with fit_threads():
                posterior, run = map_fit(model, dataset, seed, epochs, batch_lr)
            row = check_row(dataset, architecture, variant, seed, epochs, batch_lr, posterior, run,
                            time.perf_counter() - began, header)
            table = keep_row(rows, row, COLUMNS, args.csv,
                             f"map_check variant={variant!r} seed={seed} share={row['share']:.4f} flat={run.flat} "
                             f"test_ll={row['test_ll']:.4f} seconds={row['seconds']:.1f}")
    return table


if __name__ == "__main__":
    main()
