r"""The verdict of the MAP-centred fits (Laplace, MAP, the ensemble) on UCI cells, with what it rests on.

Each cell is fitted as ``bnn uci`` fits it: the papers' network (one ReLU hidden layer of the folder's
``n_hidden.txt`` units, :func:`~bnn.experiments.uci.protocol.uci_model`), ``fit(model, data, method, seed=0,
progress=False)`` plus the options given, on one torch thread. One JSON line per fit: the verdict (``converged``) and
the problems it reports, the Newton decrement at the MAP, the rise of the log joint over the last window of L-BFGS
iterations, the polish, the test log-likelihood and the seconds of the fit. Run it on two commits and compare the
files: the share of cells flagged, and whether deliberately broken fits (``map_steps=10 map_max_iter=10``) stay
flagged.

Usage::

    python -m benchmarks.map_verdicts --uci-dir DIR --methods laplace,map --cells yacht:0,bostonHousing:0 \
        --out verdicts.jsonl [map_steps=10 map_max_iter=10]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch
from bnn.datasets import load_uci
from bnn.inference import fit
from bnn.inference.evaluation import evaluate

from bnn.experiments.uci.grid import hidden_units
from bnn.experiments.uci.protocol import uci_model

RECORDED = ("map_newton_decrement", "map_last_rise", "map_polish", "map_at_kink", "map_lbfgs_iterations")
"""The MAP record's fields each line keeps (``None`` where the method's record has none: the ensemble)."""


def verdict_row(uci_dir: Path, dataset: str, split: int, method: str, options: dict[str, int]) -> dict:
    """Fit one cell and say what its own check says and what it rests on."""
    data = load_uci(uci_dir, dataset, split)
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the verdict is read from the record
        posterior = fit(uci_model(data.in_features, hidden_units(uci_dir / dataset)), data, method, seed=0, progress=False,
                        **options)
    record = posterior.record
    row = {"dataset": dataset, "split": split, "method": method, "options": options,
           "seconds": round(time.perf_counter() - began, 1), "converged": record.converged,
           "problems": record.problems(), "test_ll": float(evaluate(posterior, data)["test_ll"])}
    return row | {key: getattr(record, key, None) for key in RECORDED}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.map_verdicts", description=__doc__.split("\n")[0])
    parser.add_argument("--uci-dir", type=Path, required=True)
    parser.add_argument("--methods", default="laplace,map", help="comma-separated MAP-centred methods")
    parser.add_argument("--cells", required=True, help="comma-separated DATASET:SPLIT")
    parser.add_argument("--out", type=Path, required=True, help="a JSON-lines file, appended to")
    parser.add_argument("options", nargs="*", help="integer fit options, as map_steps=10")
    args = parser.parse_args(argv)
    options = {key: int(value) for key, value in (item.split("=", 1) for item in args.options)}
    cells = [(name, int(split)) for name, split in (cell.rsplit(":", 1) for cell in args.cells.split(","))]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as every `bnn uci` cell runs
    rows = []
    try:
        for method in args.methods.split(","):
            for dataset, split in cells:
                row = verdict_row(args.uci_dir, dataset, split, method, options)
                with args.out.open("a") as out:
                    out.write(json.dumps(row) + "\n")
                print({key: value for key, value in row.items() if key != "problems"}, flush=True)
                rows.append(row)
    finally:
        torch.set_num_threads(threads)
    return rows


if __name__ == "__main__":
    main()
