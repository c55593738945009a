r"""AutoNormal's start under hierarchical priors: every latent drawn from its prior, or the weights drawn and the
scales and the noise at their prior medians.

The toy1d network of the main job (one hidden layer of 50 tanh units, a learned noise) with each ``--priors`` prior
on every layer is fitted by SVI with the ``autonormal`` guide at the SVI defaults, once per seed and start:

``drawn``
    Pyro's ``init_to_sample``: every latent, the half-Cauchy scales and the noise included, starts at a prior draw
    (the ``autonormal`` guide's ``init_loc="prior"`` before the medians).
``medians``
    ``init_loc="prior"`` now: the weights (the standardised weights of a hierarchical prior) start at a prior draw,
    every other latent at its prior median (:mod:`bnn.guides.autonormal`).

Per fit: the final ELBO (the objective both starts maximise: the higher, the better the fit by its own measure), the
test log-likelihood and RMSE (standardised units), SVI's own check and the seconds. A fit whose test RMSE is at least
0.8 predicts about the targets' mean (their standard deviation is 1): it ignores its input. Each fit runs on one torch
thread.

Usage::

    python -m benchmarks.autonormal_init [--priors ard layer-scale horseshoe gaussian] [--seeds 0 1 2 3 4]
        [--steps N] [--out benchmarks/results/autonormal_init]

It writes ``results.json`` (every number, the command, the commit and the machine) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.models import BayesianMLP
from pyro.infer.autoguide import AutoNormal, init_to_sample

from benchmarks.provenance import header_line, printed_rows, run_header, write_results
from bnn.runtime.workers import one_torch_thread

STARTS = ("drawn", "medians")
IGNORES_INPUT_RMSE = 0.8
"""A test RMSE at or above this (standardised targets, standard deviation 1) is a fit that predicts about the mean."""


def guide_of(start: str) -> dict:
    """``fit``'s guide arguments for ``start`` (module notes)."""
    if start == "drawn":
        return {"guide": AutoNormal, "guide_options": {"init_loc_fn": init_to_sample, "init_scale": 0.1}}
    return {"guide": "autonormal"}


def fit_one(prior: str, start: str, seed: int, steps: int | None) -> dict:
    """One SVI fit of the toy1d network under ``prior`` from ``start``."""
    data = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(50,), prior=prior, likelihood={"name": "gaussian", "scale": None})
    began = time.perf_counter()
    with one_torch_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = fit(model, data, "svi", seed=seed, progress=False, **guide_of(start),
                        **({} if steps is None else {"steps": steps}))
        metrics = evaluate(posterior, data)
    return {"prior": prior, "start": start, "seed": seed, "final_elbo": posterior.record.final_elbo,
            "test_ll": metrics["test_ll"], "test_rmse": metrics["test_rmse"],
            "converged": posterior.record.converged, "seconds": time.perf_counter() - began}


def summary_rows(rows: list[dict]) -> list[str]:
    """Per prior and start: the fits that ignore their input and those whose ELBO was still rising, and the medians
    and worst of the ELBO and test LL."""
    lines = []
    for prior in dict.fromkeys(row["prior"] for row in rows):
        for start in STARTS:
            group = [row for row in rows if row["prior"] == prior and row["start"] == start]
            if not group:
                continue
            elbo, ll = [row["final_elbo"] for row in group], [row["test_ll"] for row in group]
            ignoring = sum(row["test_rmse"] >= IGNORES_INPUT_RMSE for row in group)
            rising = sum(row["converged"] is False for row in group)
            lines.append(f"| {prior} | {start} | {len(group)} | {ignoring} | {rising} | {statistics.median(elbo):.1f} | "
                         f"{min(elbo):.1f} | {statistics.median(ll):.3f} | {min(ll):.3f} |")
    return lines


SUMMARY_HEADER = ("| prior | start | fits | ignore the input (test RMSE >= 0.8) | ELBO still rising | median final ELBO | "
                  "lowest | median test LL | lowest |\n|" + " --- |" * 9)


FITS_HEADER = "| prior | start | seed | final ELBO | test LL | test RMSE | own check | seconds |\n|" + " --- |" * 8


def fit_rows(rows: list[dict]) -> list[str]:
    """One line per fit: its ELBO, test scores, SVI's own check and seconds."""
    checks = {True: "passed", False: "ELBO still rising", None: "not judged"}
    return [f"| {row['prior']} | {row['start']} | {row['seed']} | {row['final_elbo']:.1f} | {row['test_ll']:.3f} | "
            f"{row['test_rmse']:.3f} | {checks[row['converged']]} | {row['seconds']:.0f} |" for row in rows]


def tables_from_json(*results: Path) -> str:
    """The summary per prior and start, then every fit, over the fits of one or more ``results.json`` files."""
    rows = [row for path in results for row in json.loads(path.read_text())["rows"]]
    return "\n".join([SUMMARY_HEADER, *summary_rows(rows), "", FITS_HEADER, *fit_rows(rows)]) + "\n"


def markdown(results: dict) -> str:
    """The summary per prior and start, then one row per fit."""
    lines = ["# AutoNormal's start under hierarchical priors: drawn scales against prior medians", "",
             (__doc__ or "").split("Usage::")[0].strip(), "", header_line(results["header"]), "",
             SUMMARY_HEADER, *summary_rows(results["rows"]), "", FITS_HEADER, *fit_rows(results["rows"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.autonormal_init", description=__doc__.split("\n")[0])
    parser.add_argument("--priors", nargs="+", default=["ard", "layer-scale", "horseshoe", "gaussian"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=None, help="SVI steps (default: SVI's default)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/autonormal_init"))
    args = parser.parse_args(argv)
    header = run_header("benchmarks.autonormal_init", argv)  # the commit whose code runs, before any later checkout
    rows = printed_rows(fit_one(prior, start, seed, args.steps)
                        for prior in args.priors for seed in args.seeds for start in STARTS)
    results = {"header": header, "rows": rows}
    write_results(args.out, results, markdown(results))
    return results


if __name__ == "__main__":
    main()
