r"""Why mean-field SVI underfits toy1d, and the defaults that fix what optimisation can fix.

Each setting fits the model of ``bnn compare --dataset toy1d`` (1-50-1 tanh, :math:`\mathcal{N}(0, 1)` prior on
every weight, learned noise with a HalfNormal(1) prior) by SVI from seed 0, and reports the ELBO against steps (the
mean of the 50 estimates up to each mark), the final ELBO (mean of the last 50), SVI's own check (is the ELBO still
rising, :mod:`bnn.inference.core.objective_trend`), the test log-likelihood, RMSE and the coverage of the 50% and 90%
predictive intervals, the posterior mean of the noise scale (standardised units) and the wall time of the fit.

Two references frame the numbers: the Laplace log evidence :math:`\log Z` of ``method="laplace"`` (GGN, full) on the
same model, and what the mean-field family gives up at that mode. For a Gaussian posterior
:math:`\mathcal{N}(m, \Lambda^{-1})` the best mean-field Gaussian has means :math:`m` and variances
:math:`1/\Lambda_{kk}`, and its ELBO falls short of :math:`\log Z` by

.. math::

    \mathrm{KL}(q^\star \,\|\, p) = \tfrac12\Big(\sum_k \ln \Lambda_{kk} - \ln\det\Lambda\Big),

so in the quadratic approximation around the Laplace mode no mean-field Gaussian reaches an ELBO above
:math:`\log Z - \mathrm{KL}(q^\star \| p)`.

Usage::

    python -m benchmarks.svi_defaults [--settings NAME,...] [--out table.md] [--csv-dir DIR]

``--csv-dir`` writes the rows (``settings.csv``) and the Laplace reference (``reference.csv``), from which
:func:`tables_from_csv` prints the reference and the table again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import torch
from bnn.datasets import load_toy1d
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.models import BayesianMLP, GaussianPrior

from benchmarks.provenance import read_rows

MARKS = (1000, 2500, 5000, 10000, 20000)
"""Steps at which the ELBO is shown."""
RECENT = 50

CONSTANT = {"lr_schedule": "constant"}
COSINE = {"lr_schedule": "cosine", "final_lr_fraction": 0.01}
WEIGHTS = {"local_reparameterisation": False}
LOCAL = {"local_reparameterisation": True}
SETTINGS: dict[str, dict] = {
    "autonormal, lr 0.01 constant, 10k (old compare)": {"guide": "autonormal", "steps": 10000, **CONSTANT},
    "autonormal, cosine, 10k": {"guide": "autonormal", "steps": 10000, **COSINE},
    "autonormal, cosine, 8 particles, 10k": {"guide": "autonormal", "steps": 10000, "num_particles": 8, **COSINE},
    "meanfield, lr 0.01 constant, 10k": {"guide": "meanfield", "steps": 10000, "guide_options": WEIGHTS, **CONSTANT},
    "meanfield, cosine, 10k": {"guide": "meanfield", "steps": 10000, "guide_options": WEIGHTS, **COSINE},
    "meanfield, cosine, lr 0.03, 10k": {"guide": "meanfield", "steps": 10000, "lr": 0.03, "guide_options": WEIGHTS,
                                        **COSINE},
    "meanfield, cosine, MAP start, 10k": {"guide": "meanfield", "steps": 10000,
                                          "guide_options": {"init_loc": "map", **WEIGHTS}, **COSINE},
    "meanfield, cosine, 8 particles, 10k": {"guide": "meanfield", "steps": 10000, "num_particles": 8,
                                            "guide_options": WEIGHTS, **COSINE},
    "meanfield, local reparam., cosine, 2k": {"guide": "meanfield", "steps": 2000, "guide_options": LOCAL, **COSINE},
    "meanfield, local reparam., cosine, 5k": {"guide": "meanfield", "steps": 5000, "guide_options": LOCAL, **COSINE},
    "meanfield, local reparam., cosine, 20k": {"guide": "meanfield", "steps": 20000, "guide_options": LOCAL, **COSINE},
    "fit's defaults: meanfield, local reparam., cosine, 10k": {},
}
"""Every setting names its guide, schedule and sampling in full, so that it means the same whatever fit's defaults."""


def build_model() -> BayesianMLP:
    """The model of ``bnn compare --dataset toy1d``."""
    return BayesianMLP(1, 1, hidden=(50,), activation="tanh", prior=GaussianPrior(1.0),
                       likelihood={"name": "gaussian", "scale": None})


def mean_field_gap(covariance: torch.Tensor) -> float:
    r""":math:`\tfrac12(\sum_k \ln\Lambda_{kk} - \ln\det\Lambda)` for :math:`\Lambda` the inverse of ``covariance``."""
    precision = torch.linalg.inv(covariance.double())
    return float(0.5 * (torch.log(torch.diagonal(precision)).sum() - torch.logdet(precision)))


def run_setting(name: str, options: dict, data) -> dict:
    """Fit one setting; its row of the tables."""
    start = time.perf_counter()
    posterior = fit(build_model(), data, method="svi", jit=True, seed=0, progress=False, **options)
    seconds = time.perf_counter() - start
    metrics = evaluate(posterior, data)
    elbo = posterior.record.elbo
    trend = posterior.record.trend
    return {
        "name": name, "seconds": seconds, "steps": len(elbo), "final_elbo": posterior.record.final_elbo,
        "marks": {mark: statistics.fmean(elbo[mark - RECENT:mark]) for mark in MARKS if mark <= len(elbo)},
        "rising": None if trend is None else trend.rising, "noise": float(posterior.samples["sigma"].mean()),
        "guide": posterior.record.guide, "elbo": elbo, **metrics,
    }


def laplace_reference(data) -> dict:
    """The Laplace log evidence and the mean-field gap at its mode."""
    posterior = fit(build_model(), data, method="laplace", seed=0, progress=False)
    return {"log_evidence": posterior.record.log_marginal_likelihood,
            "gap": mean_field_gap(posterior.extras["guide"].covariance()), **evaluate(posterior, data)}


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(rows: list[dict], reference: dict, command: str, load: tuple[float, float, float]) -> str:
    lines = [
        "# SVI defaults on toy1d: the ELBO against steps and settings",
        "",
        f"Command: `{command}`. Commit: {commit()}. Machine: {platform.machine()} Linux, {torch.get_num_threads()} torch "
        f"thread(s), CPU torch {torch.__version__}, Python {platform.python_version()}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average at the end {load[0]:.1f}, {load[1]:.1f}, "
        f"{load[2]:.1f} (2 cores): wall times are inflated by the load, compare them within this table only.",
        "",
        "Model: 1-50-1 tanh, N(0, 1) prior on every weight, learned noise (HalfNormal(1) prior), toy1d (100 training "
        "points); JIT-compiled ELBO, seed 0. ELBO in nats (standardised targets); test metrics in the target's units.",
        "",
        reference_line(reference),
        "",
        table(rows),
    ]
    return "\n".join(lines) + "\n"


def reference_line(reference: dict) -> str:
    """The Laplace reference: its log evidence and test scores, the mean-field gap at its mode, and the ELBO bound
    they give (``bound``, the log evidence less the gap, where the reference comes from a CSV of rounded numbers)."""
    bound = reference.get("bound", reference["log_evidence"] - reference["gap"])
    return (f"Reference: Laplace (GGN, full) log evidence {reference['log_evidence']:.2f}, test LL "
            f"{reference['test_ll']:.3f}, coverage {reference['coverage_50']:.2f} / {reference['coverage_90']:.2f}. "
            f"The best mean-field Gaussian of that Laplace posterior loses "
            f"KL = 1/2 (sum ln Lambda_kk - ln det Lambda) = {reference['gap']:.1f} nats: near the data-fitting mode "
            f"no mean-field Gaussian reaches an ELBO above about {bound:.1f} "
            "(quadratic approximation).")


def table(rows: list[dict]) -> str:
    """One row per setting: the ELBO at each mark and at the end, SVI's own check, the test scores, noise, seconds."""
    lines = ["| setting | " + " | ".join(f"ELBO @{mark}" for mark in MARKS)
             + " | final ELBO | still rising | test LL | RMSE | cov 50 | cov 90 | noise sd | wall s |",
             "|---|" + "---|" * (len(MARKS) + 8)]
    for row in rows:
        marks = " | ".join(f"{row['marks'][mark]:.1f}" if mark in row["marks"] else "" for mark in MARKS)
        rising = "not judged" if row["rising"] is None else ("yes" if row["rising"] else "no")
        lines.append(f"| {row['name']} | {marks} | {row['final_elbo']:.1f} | {rising} | {row['test_ll']:.3f} "
                     f"| {row['test_rmse']:.3f} | {row['coverage_50']:.2f} | {row['coverage_90']:.2f} "
                     f"| {row['noise']:.3f} | {row['seconds']:.1f} |")
    return "\n".join(lines)


ROW_COLUMNS = ("name", *(f"elbo_at_{mark}" for mark in MARKS), "final_elbo", "rising", "test_ll", "test_rmse",
               "coverage_50", "coverage_90", "noise", "seconds")
REFERENCE_COLUMNS = ("log_evidence", "gap", "bound", "test_ll", "coverage_50", "coverage_90")


def write_csv(rows: list[dict], reference: dict, folder: Path) -> None:
    """``settings.csv`` (a row per setting, the ELBO at each mark a column) and ``reference.csv`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    flat = [{**row, **{f"elbo_at_{mark}": value for mark, value in row["marks"].items()},
             "rising": {None: "", True: "yes", False: "no"}[row["rising"]]} for row in rows]
    pd.DataFrame(flat).reindex(columns=ROW_COLUMNS).to_csv(folder / "settings.csv", index=False)
    bound = reference["log_evidence"] - reference["gap"]
    pd.DataFrame([{**reference, "bound": bound}]).reindex(columns=REFERENCE_COLUMNS).to_csv(folder / "reference.csv",
                                                                                         index=False)


def tables_from_csv(settings: Path, reference: Path) -> str:
    """The reference and the table of a run from the files of ``--csv-dir`` alone."""
    rows = [{**row, "marks": {mark: row[f"elbo_at_{mark}"] for mark in MARKS if row[f"elbo_at_{mark}"] != ""},
             "rising": {"": None, "yes": True, "no": False}[row["rising"]]} for row in read_rows(settings)]
    (laplace,) = read_rows(reference)
    return f"{reference_line(laplace)}\n\n{table(rows)}\n"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.svi_defaults", description=__doc__.split("\n")[0])
    parser.add_argument("--settings", help=f"comma-separated subset of: {'; '.join(SETTINGS)}")
    parser.add_argument("--out", type=Path, help="write the Markdown here (it is printed either way)")
    parser.add_argument("--csv-dir", type=Path, help="write the rows and the reference here, as CSV")
    parser.add_argument("--traces", type=Path, help="also write every setting's ELBO of every step here (JSON)")
    args = parser.parse_args(argv)
    names = list(SETTINGS) if args.settings is None else [name.strip() for name in args.settings.split(",")]
    unknown = [name for name in names if name not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {unknown}; choose from {list(SETTINGS)}")
    torch.set_num_threads(1)
    data = load_toy1d()
    reference = laplace_reference(data)
    rows = []
    for name in names:
        rows.append(run_setting(name, SETTINGS[name], data))
        print({key: value for key, value in rows[-1].items() if key != "elbo"}, flush=True)
    command = " ".join(["python -m benchmarks.svi_defaults", *(sys.argv[1:] if argv is None else argv)])
    text = markdown(rows, reference, command, os.getloadavg())
    if args.out is not None:
        args.out.write_text(text)
    if args.csv_dir is not None:
        write_csv(rows, reference, args.csv_dir)
    if args.traces is not None:
        args.traces.write_text(json.dumps({row["name"]: row["elbo"] for row in rows}))
    print(text)
    return rows


if __name__ == "__main__":
    main()
