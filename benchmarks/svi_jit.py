r"""SVI with and without its JIT-compiled loss, by the run's length: where compiling pays.

``JitTrace_ELBO`` compiles the loss on the first step, then takes each step faster than ``Trace_ELBO``; a short run
pays the compilation and gains little. Each network is fitted by ``fit(..., "svi", steps=T, jit=...)`` for each
``--steps`` :math:`T`, with and without JIT, alternately (so both see the same load), ``--repeats`` times, on one torch
thread; a cell is the median of the record's ``train_seconds`` (the steps, the compilation included). The networks:

- ``toy1d``: the main job's, a 1-50-1 tanh network with a learned noise on toy1d's 100 rows, fit's default guide;
- ``horseshoe``: a 2-5-4-1 network under horseshoe priors on 24 rows, AutoNormal with two particles (the tests'
  hierarchical networks);
- ``digits``: the 64-50-10 MLP on digits' 1,437 rows, full batch.

Usage::

    python -m benchmarks.svi_jit [--steps 10 50 100 200 1000] [--repeats 3] [--csv benchmarks/results/svi_jit/times.csv]

It prints a line per fit and writes every time to ``--csv``, from which :func:`tables_from_csv` makes the table.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
from bnn.datasets import load_dataset, load_toy1d
from bnn.inference import fit
from bnn.models import BayesianMLP, HorseshoePrior

from benchmarks.provenance import header_line, run_header
from bnn.runtime.atomic import atomic_file
from bnn.runtime.workers import one_torch_thread

CSV = Path(__file__).parent / "results" / "svi_jit" / "times.csv"


def toy1d() -> tuple[BayesianMLP, tuple, dict]:
    model = BayesianMLP(1, 1, hidden=(50,), likelihood={"name": "gaussian", "scale": None})
    data = load_toy1d()
    return model, (data.x_train, data.y_train), {}


def horseshoe() -> tuple[BayesianMLP, tuple, dict]:
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(24, 2, generator=generator), torch.randn(24, generator=generator)
    model = BayesianMLP(2, 1, hidden=(5, 4), prior=HorseshoePrior(), likelihood={"name": "gaussian", "scale": None})
    return model, (x, y), {"guide": "autonormal", "num_particles": 2}


def digits() -> tuple[BayesianMLP, tuple, dict]:
    data = load_dataset("digits")
    model = BayesianMLP(64, 10, hidden=(50,), likelihood="categorical")
    return model, (data.x_train, data.y_train), {"batch_size": len(data.x_train)}


PROBLEMS: dict[str, Callable[[], tuple[BayesianMLP, tuple, dict]]] = {
    "toy1d": toy1d, "horseshoe": horseshoe, "digits": digits}


def fit_seconds(problem: str, steps: int, jit: bool) -> float:
    """The ``train_seconds`` of one fit of ``problem`` for ``steps`` steps, JIT or not."""
    model, data, options = PROBLEMS[problem]()
    with one_torch_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short runs: the ELBO is still rising, as expected
        posterior = fit(model, data, "svi", steps=steps, jit=jit, num_samples=10, progress=False, seed=0, **options)
    return posterior.record.train_seconds


def tables_from_csv(path: Path) -> str:
    """Per network and length: the median seconds with and without JIT, and their ratio."""
    frame = pd.read_csv(path)
    lines = ["| network | steps | JIT s (median) | no JIT s (median) | JIT / no JIT |", "|---|---|---|---|---|"]
    for (problem, steps), group in frame.groupby(["problem", "steps"], sort=False):
        on = statistics.median(group[group["jit"]]["seconds"])
        off = statistics.median(group[~group["jit"]]["seconds"])
        lines.append(f"| {problem} | {steps} | {on:.2f} | {off:.2f} | {on / off:.2f} |")
    runs = list(dict.fromkeys(header_line(row) for row in frame.to_dict("records")))
    return "\n".join(lines) + "\n\n" + "\n".join(runs) + "\n"


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.svi_jit", description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--steps", nargs="+", type=int, default=[10, 50, 100, 200, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args(argv)
    header = run_header("benchmarks.svi_jit", argv)
    fit_seconds(args.problems[0], 2, True)  # imports and first-use costs out of the first timed fit
    rows = []
    for problem in args.problems:
        for steps in args.steps:
            for repeat in range(args.repeats):
                for jit in (True, False):
                    seconds = fit_seconds(problem, steps, jit)
                    print(f"svi_jit problem={problem} steps={steps} jit={jit} repeat={repeat} seconds={seconds:.3f}",
                          flush=True)
                    rows.append({"problem": problem, "steps": steps, "jit": jit, "repeat": repeat, "seconds": seconds,
                                 **header})
    frame = pd.DataFrame(rows)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.csv) as handle:
        frame.to_csv(handle, index=False)
    print(tables_from_csv(args.csv))
    return frame


if __name__ == "__main__":
    main()
