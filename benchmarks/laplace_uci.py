r"""Laplace on the six shipped UCI regression sets, split 0: the papers' network, the collection's defaults.

Each set is fitted with ``fit(model, data, "laplace", seed=0, progress=False)`` plus the options of a
configuration; the model is what ``bnn fit`` builds: one tanh hidden layer of ``n_hidden.txt`` units (50; 100 for
protein), :math:`\mathcal{N}(0, 1)` on every weight, a learned Gaussian noise (chosen with the MAP fit: see each
run's commit). The test metrics are :func:`~bnn.inference.evaluation.metrics.evaluate`'s with the linearised predictive,
in the target's original units: RMSE, the mean log predictive density, and the share of test points inside the
central 90% and 50% predictive intervals.

Usage::

    python -m benchmarks.laplace_uci run --uci-dir DIR --label after --json after.json [--config default]
    python -m benchmarks.laplace_uci report before.json after.json ... --out table.md

``run --source TREE`` imports ``bnn`` from ``TREE`` (links laid out as the installed package, into an archive of an
older commit), so "before" is measured with the same script; it records the command, the commit of the code it ran,
the machine and its load average. ``report`` writes the runs' lines and :func:`tables_from_json`'s tables, which
``benchmarks/results/laplace_uci.md`` holds from the committed JSON files (:mod:`benchmarks.results_tables`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

from benchmarks.provenance import header_line

DATASETS = ("bostonHousing", "concrete", "energy", "yacht", "kin8nm", "protein-tertiary-structure")
CONFIGS = {
    "default": {},
    "untuned": {"tune_prior_precision": False},
    "diag": {"structure": "diag"},
    "last-layer": {"structure": "last-layer"},
}
"""Options added to ``fit``'s defaults, by configuration name."""
COLUMNS = ("dataset", "rows", "weights", "structure", "test_rmse", "test_ll", "coverage_90", "coverage_50",
           "map_grad_norm", "map_newton_decrement", "map_converged", "map_polish", "map_iterations",
           "prior_precision_multiplier", "noise", "evidence_fits", "log_marginal_likelihood", "seconds")


def _commit(folder: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fit_one(uci_dir: Path, name: str, options: dict) -> dict:
    """Fit ``name``'s split 0 with Laplace's defaults plus ``options``; the row of the table."""
    from bnn.datasets import load_uci
    from bnn.inference import fit
    from bnn.inference.evaluation.metrics import evaluate
    from bnn.models import BayesianMLP

    data = load_uci(uci_dir, name, 0)
    hidden = int((uci_dir / name / "n_hidden.txt").read_text().split()[0])
    model = BayesianMLP(data.in_features, 1, hidden=(hidden,), activation="tanh", prior={"name": "gaussian"},
                        likelihood={"name": "gaussian", "scale": None})
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior = fit(model, data, "laplace", seed=0, progress=False, **options)
    seconds = time.perf_counter() - began
    record = posterior.record
    return {
        "dataset": name, "rows": int(data.x_train.shape[0]), "weights": sum(s.numel for s in model.sites),
        "structure": record.structure, **evaluate(posterior, data), "map_grad_norm": record.map_grad_norm,
        "map_newton_decrement": getattr(record, "map_newton_decrement", None), "map_converged": record.map_converged,
        "map_polish": getattr(record, "map_polish", None) or "lbfgs", "map_iterations": record.map_lbfgs_iterations,
        "prior_precision_multiplier": record.prior_precision_multiplier, "noise": record.noise,
        "evidence_fits": getattr(record, "evidence_rounds", None), "log_marginal_likelihood": record.log_marginal_likelihood,
        "seconds": seconds,
        "warnings": sorted({str(w.message).split(":")[0] for w in caught}),
    }


def _import_from(source: Path) -> None:
    """Make ``import bnn`` load the tree at ``source`` (a folder holding ``bnn/`` laid out as installed) instead of
    the editable install, whose import hook would otherwise win over ``sys.path``."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    sys.path.insert(0, str(source))


def run(args: argparse.Namespace) -> None:
    if args.source:
        _import_from(args.source)
    import bnn

    rows = []
    for name in args.datasets:
        row = fit_one(args.uci_dir, name, CONFIGS[args.config])
        print(json.dumps(row), flush=True)
        rows.append(row)
    source = Path(bnn.__file__).resolve().parent.parent
    header = {
        "label": args.label, "config": args.config, "options": CONFIGS[args.config],
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.laplace_uci", *sys.argv[1:]]),
        "commit": args.commit or _commit(source), "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores)",
        "load_average_after": os.getloadavg(), "date": datetime.date.today().isoformat(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=1))


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.3e}"
    return str(value)


def run_table(run_: dict) -> list[str]:
    """One run's section: a heading naming its label and options, a row per data set, then its fits' warnings."""
    header = run_["header"]
    options = ", ".join(f"{k}={v}" for k, v in header["options"].items()) or "no options: the defaults"
    columns = [column for column in COLUMNS if any(column in row for row in run_["rows"])]
    parts = [f"## {header['label']} ({options})", "", "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    parts += ["| " + " | ".join(_cell(row.get(column)) for column in columns) + " |" for row in run_["rows"]]
    problems = [f"{row['dataset']}: {'; '.join(row['warnings'])}" for row in run_["rows"] if row["warnings"]]
    return parts + ["", *(f"- warnings: {line}" for line in problems), ""]


def tables_from_json(*paths: Path) -> str:
    """Every run's section, from the JSON files of ``run`` alone."""
    return "\n".join(line for path in paths for line in run_table(json.loads(path.read_text()))).rstrip("\n") + "\n"


def report(args: argparse.Namespace) -> None:
    runs = [json.loads(path.read_text()) for path in args.runs]
    lines = [header_line(run_["header"]) + f", OMP_NUM_THREADS={run_['header']['omp_num_threads']}" for run_ in runs]
    args.out.write_text("\n".join(["# Laplace on the UCI regression sets, split 0", "",
                                   (__doc__ or "").split("Usage::")[0].strip(), "", *lines, ""]) + "\n"
                        + tables_from_json(*args.runs))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.laplace_uci", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="fit the sets, write one JSON file")
    run_parser.add_argument("--uci-dir", type=Path, required=True)
    run_parser.add_argument("--label", required=True)
    run_parser.add_argument("--config", choices=sorted(CONFIGS), default="default")
    run_parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    run_parser.add_argument("--json", type=Path, required=True)
    run_parser.add_argument("--source", type=Path, help="import bnn from this tree (bnn/ laid out as installed, for "
                            "example links into an archive of an older commit) instead of the installed one")
    run_parser.add_argument("--commit", help="the commit of the code run, when it is not a git checkout (an archive)")
    report_parser = commands.add_parser("report", help="the markdown table of one or more runs")
    report_parser.add_argument("runs", nargs="+", type=Path)
    report_parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    (run if args.command == "run" else report)(args)


if __name__ == "__main__":
    main()
