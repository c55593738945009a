r"""Cost estimates against the fits they estimate: each cell's estimate as ``bnn compare`` prints it, then the fit.

For every method and cell, the estimate (:func:`bnn.inference.evaluation.cost.estimate_cost`, its units timed here)
and then ``fit(model, data, method, seed=0, progress=False)`` at the method's defaults, timed by the wall clock; one
Markdown row per fit: the estimate (and the worst case of the MAP-centred fits), the seconds the estimate itself
took, the fit's seconds and their ratio; for a MAP or Laplace fit in this process, its polish iterations as the cost
model counts them (:mod:`bnn.inference.map_search.map_cost`): the first polish, the evidence search's later
refits (their total and count) and the final polish. A cell is ``toy1d:SEED`` (the built-in set, seeded as ``bnn
compare --seed`` seeds it) or ``DATASET:SPLIT`` of the UCI folder; the network is the one ``bnn compare`` builds by
default (d-50-1 tanh, learned noise), or with ``--relu`` the papers' ReLU network of ``bnn uci``.

Usage::

    python -m benchmarks.estimates --methods laplace,map --cells toy1d:0,toy1d:1 [--uci-dir DIR --cells kin8nm:0]
        [--relu]
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import torch
from bnn.datasets import load_dataset, load_uci
from bnn.inference import fit
from bnn.inference.evaluation.cost import estimate_cost
from bnn.inference.fit import METHODS, prepare_data
from bnn.inference.map_search.polish import MapProblem

from benchmarks.nuts_defaults import default_model
from benchmarks.provenance import table_header
from bnn.experiments.uci.grid import hidden_units
from bnn.experiments.uci.protocol import uci_model

COLUMNS = ["method", "cell", "network", "estimate s", "how counted", "at most s", "estimating s", "fit s",
           "fit / estimate", "polish iterations: first / refits (count) / final"]


@contextmanager
def polishes_counted() -> Iterator[list[int]]:
    """The iterations of each MAP polish run in this process within the block, in order (each
    :meth:`~bnn.inference.map_search.polish.MapProblem.polish` call: the evidence search's refits, then the final
    polish)."""
    counts: list[int] = []
    original = MapProblem.polish

    def counted(problem, *args, **kwargs):
        before = problem.iterations
        theta = original(problem, *args, **kwargs)
        counts.append(problem.iterations - before)
        return theta

    MapProblem.polish = counted
    try:
        yield counts
    finally:
        MapProblem.polish = original


def polish_column(counts: list[int]) -> str:
    """``first / refits (count) / final`` of one MAP fit's polishes; the sole polish of a fit without a search; blank
    for none (the ensemble's members polish in other processes)."""
    if len(counts) < 2:
        return " / ".join(map(str, counts))
    return f"{counts[0]} / {sum(counts[1:-1])} ({len(counts) - 2}) / {counts[-1]}"


def cell_problem(cell: str, uci_dir: Path | None, relu: bool):
    """The data and the network of ``cell`` (``toy1d:SEED`` or ``DATASET:SPLIT``), and the network's name."""
    name, _, number = cell.rpartition(":")
    if name == "toy1d":
        data = load_dataset("toy1d", seed=int(number))
    elif uci_dir is None:
        raise SystemExit(f"cell {cell!r} needs --uci-dir")
    else:
        data = load_uci(uci_dir, name, int(number))
    if relu and name != "toy1d":
        return data, uci_model(data.in_features, hidden_units(uci_dir / name)), "ReLU (bnn uci)"
    return data, default_model(data.in_features), "tanh (bnn compare)"


def estimate_row(method: str, cell: str, uci_dir: Path | None, relu: bool) -> dict:
    """Estimate one fit, run it, and say both."""
    data, model, network = cell_problem(cell, uci_dir, relu)
    x, y = prepare_data(model, data)
    began = time.perf_counter()
    estimate = estimate_cost(method, METHODS.get(method).parse({}, model), model, x, y)
    estimating = time.perf_counter() - began
    began = time.perf_counter()
    with warnings.catch_warnings(), polishes_counted() as counts:
        warnings.simplefilter("ignore")  # the time is measured, not the verdict
        fit(model, data, method, seed=0, progress=False)
    seconds = time.perf_counter() - began
    return {"method": method, "cell": cell, "network": network, "estimate s": round(estimate.seconds, 1),
            "how counted": estimate.bound,
            "at most s": round(estimate.most_seconds, 1) if estimate.polish_at_most else "",
            "estimating s": round(estimating, 1), "fit s": round(seconds, 1),
            "fit / estimate": round(seconds / estimate.seconds, 2),
            "polish iterations: first / refits (count) / final": polish_column(counts)}


def tables_from_csv(path: Path) -> str:
    """The tables of one or more runs from a CSV of their printed rows alone: a ``table`` column (each table's heading),
    then :data:`COLUMNS` as printed (a table without a column, the runs before it was added, leaves it empty)."""
    parts = []
    for title, rows in pd.read_csv(path, dtype=str, keep_default_na=False).groupby("table", sort=False):
        columns = [column for column in COLUMNS if (rows[column] != "").any()]
        lines = [table_header(columns), *("| " + " | ".join(cells) + " |" for cells in rows[columns].values.tolist())]
        parts.append(f"## {title}\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.estimates", description=__doc__.split("\n")[0])
    parser.add_argument("--methods", default="laplace,map,ensemble", help="comma-separated methods")
    parser.add_argument("--cells", default="toy1d:0", help="comma-separated toy1d:SEED or DATASET:SPLIT")
    parser.add_argument("--uci-dir", type=Path)
    parser.add_argument("--relu", action="store_true", help="the papers' ReLU network on UCI cells")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the UCI cells and the workers run
    print(table_header(COLUMNS))
    rows = []
    try:
        for method in args.methods.split(","):
            for cell in args.cells.split(","):
                rows.append(estimate_row(method, cell, args.uci_dir, args.relu))
                print("| " + " | ".join(str(rows[-1][column]) for column in COLUMNS) + " |", flush=True)
    finally:
        torch.set_num_threads(threads)
    return rows


if __name__ == "__main__":
    main()
