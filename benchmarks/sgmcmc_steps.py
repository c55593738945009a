r"""The SG-MCMC samplers' step from the curvature at each chain's MAP start, by step share, on toy1d.

Each run fits the main job's network (1-50-1 tanh, :math:`\mathcal{N}(0, 1)` priors, a learned noise; toy1d, 100
rows, full batches, 2 chains) with ``fit(..., method)`` at its defaults but for ``step_share`` :math:`s`: each chain
starts at its own MAP and steps at :math:`\epsilon_0 = s / \lambda_{max}` there (:mod:`bnn.inference.sgmcmc.options`).
The table gives the test RMSE, log-likelihood, 50%/90% coverage and the predictive R-hat of each run, to be read
against NUTS on the same data (test RMSE 0.129, log-likelihood 0.569, coverage 0.36/0.85 at its defaults,
``benchmarks/results/nuts_defaults.md``), with the chains' first steps, their curvature and the wall time. Each fit runs
on one torch thread; its seed is the row's.

Usage::

    python -m benchmarks.sgmcmc_steps [--methods sgld sghmc csgld] [--shares 0.5 1 2] [--seeds 0 1] [--hidden 50]
        [--set num_warmup=500] [--out benchmarks/results/sgmcmc_steps]

It writes ``results.json`` (every number, the command, the commit and the machine) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import ast
import time
import warnings
from pathlib import Path

from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.models import BayesianMLP

from benchmarks.provenance import header_line, printed_rows, run_header, write_results
from bnn.runtime.workers import one_torch_thread


def fit_one(method: str, share: float | None, seed: int, hidden: int, extra: dict) -> dict:
    """One fit of ``method`` on toy1d at ``step_share`` ``share`` (``None``: the method's default)."""
    data = load_toy1d()
    model = BayesianMLP(1, 1, hidden=(hidden,), likelihood={"name": "gaussian", "scale": None})
    options = {**extra, **({} if share is None else {"step_share": share})}
    began = time.perf_counter()
    with one_torch_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        posterior = fit(model, data, method, seed=seed, progress=False, **options)
        metrics = evaluate(posterior, data)
    record = posterior.record
    return {"method": method, "step_share": record.options.step_share, "seed": seed, **extra,
            **{key: metrics[key] for key in ("test_rmse", "test_ll", "coverage_50", "coverage_90")},
            "r_hat_predictive": record.diagnostics.r_hat_predictive, "step_sizes": record.step_sizes,
            "curvature": record.curvature, "seconds": time.perf_counter() - began}


def markdown(results: dict) -> str:
    """One row per fit."""
    header = results["header"]
    lines = ["# SG-MCMC steps from the curvature at the MAP, on toy1d", "",
             (__doc__ or "").split("Usage::")[0].strip(), "",
             header_line(header), "",
             "| method | step share | seed | test RMSE | test LL | coverage 50% / 90% | predictive R-hat | first steps | "
             "lambda_max | seconds |", "|" + " --- |" * 10]
    for row in results["rows"]:
        steps = ", ".join(f"{value:.3g}" for value in row["step_sizes"])
        curvature = ", ".join(f"{value:.3g}" for value in row["curvature"] or [])
        lines.append(f"| {row['method']} | {row['step_share']:g} | {row['seed']} | {row['test_rmse']:.3f} | "
                     f"{row['test_ll']:.3f} | {row['coverage_50']:.2f} / {row['coverage_90']:.2f} | "
                     f"{row['r_hat_predictive']:.2f} | {steps} | {curvature} | {row['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sgmcmc_steps", description=__doc__.split("\n")[0])
    parser.add_argument("--methods", nargs="+", default=["sgld", "sghmc", "csgld"])
    parser.add_argument("--shares", nargs="*", type=float, default=[],
                        help="step_share values (none: each method's default)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                        help="another fit option of every run (a Python literal), such as num_warmup=500")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/sgmcmc_steps"))
    args = parser.parse_args(argv)
    header = run_header("benchmarks.sgmcmc_steps", argv)  # the commit whose code runs, before any later checkout
    extra = {name: ast.literal_eval(value) for name, value in (item.split("=", 1) for item in args.set)}
    rows = printed_rows(fit_one(method, share, seed, args.hidden, extra)
                        for method in args.methods for share in args.shares or [None] for seed in args.seeds)
    results = {"header": header, "rows": rows}
    write_results(args.out, results, markdown(results))
    return results


if __name__ == "__main__":
    main()
