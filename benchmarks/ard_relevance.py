r"""Does the ``ard`` prior find irrelevant inputs? A UCI set with standard-normal noise columns appended.

A UCI regression set (split 0, inputs standardised with the training split) gets ``--noise-columns`` extra inputs
drawn i.i.d. :math:`\mathcal{N}(0, 1)` (seeded), independent of the target by construction. The network is the
papers' one tanh hidden layer with the ``ard`` prior on its first layer, :math:`W_{:, j} \sim \mathcal{N}(0,
\tau^2\lambda_j^2)`, :math:`\mathcal{N}(0, 1)` on the output layer and a learned Gaussian noise
(:mod:`bnn.models.hierarchical_priors`). Each method fits it (SVI with the ``autonormal`` guide, NUTS from a prior
draw, Laplace with the scales at their type-II maximum, :mod:`bnn.inference.laplace.type2_scales`) and the table
reports, per input column, the posterior median and 5%-95% interval of its scale :math:`\tau\lambda_j` (the standard
deviation of the weights reading column :math:`j`; Laplace's is a point, so its three numbers are one), then two
summaries: how many noise columns rank below every real column by their median scale, and the AUC of the median
scale as a score that tells real columns (positives) from noise columns (ties count half). The test RMSE and
log-likelihood (original units) say whether the fit is a sound one.

Usage::

    python -m benchmarks.ard_relevance --uci-dir DIR [--dataset kin8nm] [--steps 30000] [--methods svi nuts laplace] \
        [--out benchmarks/results/ard_relevance]

It writes ``results.json`` (every number, the command, the commit and the machine) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from bnn.datasets import Dataset, load_uci
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.nuts import NUTSOptions
from bnn.models import BayesianMLP

from benchmarks.provenance import header_line, run_header, write_results

METHOD_OPTIONS = {
    "svi": lambda args: {"guide": "autonormal", "steps": args.steps, "num_samples": args.num_samples, "jit": True},
    "nuts": lambda args: {"init": "prior", "num_warmup": args.num_warmup, "num_samples": args.num_samples,
                          "num_chains": args.num_chains, "max_tree_depth": args.max_tree_depth},
    "laplace": lambda args: {"num_samples": args.num_samples},
}
"""The options of each method, from the command line."""
SCALE = "layers.0.scale"
RELEVANCE = "layers.0.relevance"


def with_noise_columns(data: Dataset, count: int, seed: int) -> Dataset:
    """``data`` with ``count`` standard-normal columns appended to its training and test inputs."""
    rng = np.random.default_rng(seed)
    noise_train = rng.standard_normal((data.x_train.shape[0], count))
    noise_test = rng.standard_normal((data.x_test.shape[0], count))
    y_train, y_test = (data.y_scaler.inverse(y).numpy() for y in (data.y_train, data.y_test))  # the original units
    return Dataset.from_arrays(
        f"{data.name}+{count} noise", "regression", np.column_stack([data.x_train.numpy(), noise_train]), y_train,
        np.column_stack([data.x_test.numpy(), noise_test]), y_test)


def column_scales(samples: dict[str, torch.Tensor]) -> np.ndarray:
    r"""Draws of :math:`\tau\lambda_j`, ``(draws, columns)``."""
    tau, relevance = samples[SCALE].reshape(-1, 1), samples[RELEVANCE].flatten(0, 1)
    return (tau * relevance).double().numpy()


def separation(medians: np.ndarray, real: int) -> dict[str, float]:
    """How the median scales of the ``real`` leading columns stand against the noise columns after them: the noise
    columns below every real one, and the AUC of the scale as a real-vs-noise score (ties count half)."""
    signal, noise = medians[:real], medians[real:]
    above = (signal[:, None] > noise[None, :]).mean() + 0.5 * (signal[:, None] == noise[None, :]).mean()
    return {"noise_below_every_real": int((noise < signal.min()).sum()), "auc": float(above),
            "largest_noise_median": float(noise.max()), "smallest_real_median": float(signal.min())}


def ard_network(in_features: int, hidden: int) -> BayesianMLP:
    """The benchmark's network: one tanh hidden layer of ``hidden`` units, ``ard`` on its first layer, N(0, 1) on the
    output layer, a learned Gaussian noise."""
    return BayesianMLP(in_features, 1, hidden=(hidden,), activation="tanh", prior={"*": "gaussian", "layers.0": "ard"},
                       likelihood={"name": "gaussian", "scale": None})


def fit_one(data: Dataset, real: int, method: str, args: argparse.Namespace) -> dict:
    """Fit the ARD network by ``method``; its row of the results."""
    model = ard_network(data.in_features, args.hidden)
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior = fit(model, data, method, seed=args.seed, progress=False, **METHOD_OPTIONS[method](args))
    seconds = time.perf_counter() - began
    scales = column_scales(posterior.samples)
    low, median, high = np.quantile(scales, [0.05, 0.5, 0.95], axis=0)
    return {
        "method": method, "options": METHOD_OPTIONS[method](args), "seconds": seconds, **evaluate(posterior, data),
        "columns": [{"column": j, "kind": "real" if j < real else "noise", "median": float(median[j]),
                     "q05": float(low[j]), "q95": float(high[j])} for j in range(scales.shape[1])],
        **separation(median, real),
        "warnings": sorted({str(w.message).split(":")[0] for w in caught}),
    }


def markdown(results: dict) -> str:
    """The title, what the benchmark does and the run's line, then :func:`tables`."""
    header = results["header"]
    lines = [f"# ARD relevance: {header['dataset']} split {header['split']} + {header['noise_columns']} noise columns", "",
             (__doc__ or "").split("Usage::")[0].strip(), "", header_line(header), ""]
    return "\n".join(lines) + "\n" + tables(results)


def tables(results: dict, level: str = "##") -> str:
    """The tables of ``results``: one summary row per method, then each method's column scales under a heading at
    ``level``."""
    header = results["header"]
    lines = ["| method | seconds | test RMSE | test LL | noise columns below every real one | AUC real vs noise | "
             "largest noise median | smallest real median |", "|" + " --- |" * 8]
    for row in results["rows"]:
        lines.append(f"| {row['method']} | {row['seconds']:.0f} | {row['test_rmse']:.3f} | {row['test_ll']:.3f} | "
                     f"{row['noise_below_every_real']} of {header['noise_columns']} | {row['auc']:.3f} | "
                     f"{row['largest_noise_median']:.3g} | {row['smallest_real_median']:.3g} |")
    for row in results["rows"]:
        lines += ["", f"{level} {row['method']}: the scale of each column, median [5%, 95%]", "",
                  "| column | kind | median | 5% | 95% |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {c['column']} | {c['kind']} | {c['median']:.3g} | {c['q05']:.3g} | {c['q95']:.3g} |"
                  for c in row["columns"]]
        if row["warnings"]:
            lines += ["", f"Warnings: {'; '.join(row['warnings'])}."]
    return "\n".join(lines) + "\n"


def tables_from_json(*paths: Path) -> str:
    """The tables of one or more runs' ``results.json`` alone, each under a heading naming its data set and network."""
    parts = []
    for path in paths:
        results = json.loads(path.read_text())
        header = results["header"]
        methods = ", ".join(row["method"] for row in results["rows"])
        parts.append(f"## {header['dataset']}, split {header['split']} + {header['noise_columns']} noise columns, "
                     f"{header['hidden']} hidden units: {methods}\n\n{tables(results, level='###')}")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ard_relevance", description=__doc__.split("\n")[0])
    parser.add_argument("--uci-dir", type=Path, required=True)
    parser.add_argument("--dataset", default="kin8nm")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--noise-columns", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--methods", nargs="+", choices=sorted(METHOD_OPTIONS), default=["svi"])
    parser.add_argument("--steps", type=int, default=30000, help="SVI steps")
    parser.add_argument("--num-warmup", type=int, default=500, help="NUTS warmup draws per chain")
    parser.add_argument("--num-samples", type=int, default=500, help="draws per chain (NUTS) or from the guide (SVI)")
    parser.add_argument("--num-chains", type=int, default=2, help="NUTS chains")
    parser.add_argument("--max-tree-depth", type=int, default=NUTSOptions().max_tree_depth,
                        help="NUTS's largest tree depth, 2^depth - 1 leapfrog steps a draw at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ard_relevance"))
    args = parser.parse_args(argv)
    data = load_uci(args.uci_dir, args.dataset, args.split)
    real = data.in_features
    noisy = with_noise_columns(data, args.noise_columns, args.seed)
    provenance = run_header("benchmarks.ard_relevance", argv)  # the commit whose code runs, before any later checkout
    rows = []
    for method in args.methods:
        rows.append(fit_one(noisy, real, method, args))
        print(json.dumps({key: value for key, value in rows[-1].items() if key != "columns"}), flush=True)
    header = {"dataset": args.dataset, "split": args.split, "noise_columns": args.noise_columns, "real_columns": real,
              "hidden": args.hidden, **provenance}
    results = {"header": header, "rows": rows}
    write_results(args.out, results, markdown(results))
    return results


if __name__ == "__main__":
    main()
