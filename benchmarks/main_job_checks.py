r"""The main job's own checks over seeds: does every method of ``bnn compare --dataset toy1d`` pass its check?

For each seed :math:`s` the model, the data and each method's options are built as ``bnn compare --dataset toy1d
--seed s`` builds them (the built-in data drawn with seed :math:`s` too; further ``compare`` flags after ``--``), each
method is fitted, and one Markdown row per method and seed gives its verdict: NUTS's convergence (divergences, the
predictive :math:`\hat{R}`), SVI's ELBO trend (the gain of the last window over the one before, in standard errors,
and the allowance a falling rate gives a converged fit; :mod:`bnn.inference.core.objective_trend`), Laplace's MAP
convergence; then the count of seeds each method passed.

Usage::

    python -m benchmarks.main_job_checks [--seeds 0-9] [-- --methods svi --steps 15000]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from bnn.datasets import load_dataset
from bnn.inference import fit

from benchmarks.nuts_defaults import seeds
from benchmarks.provenance import printed_table, table_header
from bnn.cli.arguments import build_model, fit_options
from bnn.cli.main import build_parser
from bnn.experiments.comparison.run import method_specs, options_per_method

COLUMNS = ["method", "seed", "passed", "its check", "fit s"]


def check_detail(posterior) -> str:
    """What the method's own check measured, in a few words."""
    record = posterior.record
    if record.method == "nuts":
        found = record.diagnostics
        return f"predictive R-hat {found.r_hat_predictive:.4f}, {found.divergences} divergences"
    if record.method == "svi":
        trend = record.trend
        return "too short to judge" if trend is None else (
            f"ELBO gain {trend.gain:.2f} nats over the last {trend.later_steps} steps, "
            f"{trend.gain / trend.standard_error:.1f} standard errors, settling allowance {trend.allowance:.2f}")
    if hasattr(record, "map_converged"):
        return f"MAP converged: {record.map_converged}"
    return "no check"


def tables_from_csv(path: Path) -> str:
    """The table of a run from a CSV of its rows alone, every cell as printed (the columns :data:`COLUMNS`)."""
    return printed_table(path, COLUMNS)


def main(argv: list[str] | None = None) -> dict[str, int]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.main_job_checks", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=seeds, default=list(range(10)), help="the data's and the fits' seeds (0-9)")
    parser.add_argument("compare", nargs="*", help="bnn compare's flags, after --")
    args = parser.parse_args(argv)
    passed: dict[str, int] = {}
    print(table_header(COLUMNS), flush=True)
    for seed in args.seeds:
        command = build_parser().parse_args(["compare", "--dataset", "toy1d", "--quiet", "--seed", str(seed), *args.compare])
        dataset = load_dataset("toy1d", seed=seed)
        model = build_model(command, dataset)
        specs = method_specs(command.methods)
        for (method, _), options in zip(specs, options_per_method(specs, fit_options(command))):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the row says what the check found
                posterior = fit(model, dataset, method, **options)
            ok = not posterior.record.problems()
            passed[method] = passed.get(method, 0) + ok
            print(f"| {method} | {seed} | {'yes' if ok else 'no'} | {check_detail(posterior)} | "
                  f"{time.perf_counter() - start:.0f} |", flush=True)
    for method, count in passed.items():
        print(f"{method}: {count} of {len(args.seeds)} seeds passed its own check", flush=True)
    return passed


if __name__ == "__main__":
    main()
