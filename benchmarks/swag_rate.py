r"""SWAG's SGD rate: a fixed ``swag_lr`` against a step set from the curvature at each member's MAP.

On each UCI split the papers' network (one hidden layer of 50 ReLU units, :math:`\mathcal{N}(0, 1)` priors, a
learned noise), and on each built-in data set given as ``NAME:ARCHITECTURE`` (``--built-in digits:mlp``) that network
at its command-line defaults (``benchmarks.training_cost.build_network``; the split's number seeds the fit), is fitted
by ``fit(..., "swag")`` at its defaults but for the rate: a fixed ``swag_lr`` (``--fixed``;
3e-3 was the default before the curvature rule), and for each ``--shares`` :math:`s` the rate
:math:`\eta = N s / \lambda_{max}` (:mod:`bnn.inference.sgmcmc.curvature`, :math:`s` = ``step_share``). SGD is
stable along the stiffest direction only for :math:`s < 2`; a fixed rate's :math:`s` is
:math:`\eta\lambda_{max}/N`, which grows with the data size and with the noise precision. The table gives, per run,
the test RMSE and log-likelihood (original units), the rate and the time, or the error that stopped it (an
overflow), and (``--built-in`` runs, and UCI runs since SWAG's width check) the Gaussian's effective number of
parameters :math:`p_D` with its standard error against the model's latent values :math:`D`
(:mod:`bnn.inference.swag.effective_parameters`) and the fit's own check. Each fit runs on one torch thread with seed
= the split.

Usage::

    python -m benchmarks.swag_rate [--uci-dir DIR] [--datasets yacht concrete] [--built-in digits:mlp]
        [--splits 0 1] [--fixed 3e-3] [--shares 0.5 1 1.9] [--hidden 50] [--batch-size B]
        [--out benchmarks/results/swag_rate]

It writes ``results.json`` (every number, the command, the commit and the machine) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from bnn.datasets import Dataset, load_dataset, load_uci
from bnn.inference import fit
from bnn.inference.evaluation.metrics import evaluate

from benchmarks.provenance import header_line, printed_rows, run_header, write_results
from benchmarks.training_cost import build_network
from bnn.experiments.uci.protocol import uci_model
from bnn.runtime.workers import one_torch_thread


def load_data(uci_dir: Path | None, dataset: str, split: int) -> Dataset:
    """``dataset``: a UCI set's split ``split``, or a built-in ``NAME:ARCHITECTURE``'s data."""
    return load_dataset(dataset.split(":")[0]) if ":" in dataset else load_uci(uci_dir, dataset, split)


def network(data: Dataset, dataset: str, hidden: int):
    """The network a row fits: a built-in ``NAME:ARCHITECTURE``'s at its defaults, else the papers' UCI network of
    ``hidden`` units."""
    if ":" in dataset:
        return build_network(data, dataset.split(":")[1], None)
    return uci_model(data.in_features, hidden)


def fit_one(data: Dataset, model, dataset: str, split: int, rate: dict, batch_size: int | None) -> dict:
    """One SWAG fit of ``model`` on ``data`` (split ``split`` of ``dataset``) at ``rate`` (``{"swag_lr": ...}`` or
    ``{"step_share": ...}``)."""
    began = time.perf_counter()
    row = {"dataset": dataset, "split": split, **rate}
    with one_torch_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            posterior = fit(model, data, "swag", seed=split, batch_size=batch_size, progress=False, **rate)
        except ValueError as error:
            return {**row, "error": str(error).split(":")[0], "seconds": time.perf_counter() - began}
        metrics = evaluate(posterior, data)
    record = posterior.record
    score = {"accuracy": metrics["test_accuracy"]} if "test_accuracy" in metrics else {"test_rmse": metrics["test_rmse"]}
    return {**row, **score, "test_ll": metrics["test_ll"], "rate": record.sgd_rates[0],
            "curvature": record.curvature[0], "effective_parameters": record.effective_parameters[0],
            "effective_parameters_se": record.effective_parameters_se[0], "latent_values": record.latent_values,
            "check": "passed" if record.converged else "; ".join(record.problems()).split(":")[0],
            "seconds": time.perf_counter() - began}


def markdown(results: dict) -> str:
    """One row per fit; rows with the width check (``check``) in a table of their own. ``results["header"]`` is one
    run's header, or a list of the runs' whose rows the file gathers."""
    headers = results["header"] if isinstance(results["header"], list) else [results["header"]]
    lines = ["# SWAG's rate: fixed against set from the curvature", "", (__doc__ or "").split("Usage::")[0].strip(), "",
             *(header_line(header) for header in headers), ""]
    rows = results["rows"]
    plain, checked = [row for row in rows if "check" not in row], [row for row in rows if "check" in row]
    if plain:
        lines += ["| data set | split | rate rule | test RMSE | test LL | swag_lr | lambda_max at the MAP | seconds |",
                  "|" + " --- |" * 8]
    for row in plain:
        if "error" in row:
            lines.append(f"{_start(row)} {row['error']} | | | | {row['seconds']:.0f} |")
        else:
            lines.append(f"{_start(row)} {row['test_rmse']:.3f} | {row['test_ll']:.3f} | {row['rate']:.3g} | "
                         f"{row['curvature']:.3g} | {row['seconds']:.0f} |")
    if checked:
        lines += ["| data set | split | rate rule | test RMSE or accuracy | test LL | swag_lr | lambda_max at the MAP | "
                  "p_D +- se | D | check | seconds |", "|" + " --- |" * 11]
    for row in checked:
        score = f"{row['accuracy']:.4f}" if "accuracy" in row else f"{row['test_rmse']:.3f}"
        lines.append(f"{_start(row)} {score} | {row['test_ll']:.3f} | {row['rate']:.3g} | {row['curvature']:.3g} | "
                     f"{row['effective_parameters']:.0f} +- {row['effective_parameters_se']:.0f} | "
                     f"{row['latent_values']} | {row['check']} | {row['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def _start(row: dict) -> str:
    """A row's first cells: the data set, the split and how its rate was set."""
    rule = f"swag_lr {row['swag_lr']:g}" if "swag_lr" in row else f"step_share {row['step_share']:g}"
    return f"| {row['dataset']} | {row['split']} | {rule} |"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.swag_rate", description=__doc__.split("\n")[0])
    parser.add_argument("--uci-dir", type=Path, default=None)
    parser.add_argument("--datasets", nargs="*", default=["yacht", "concrete"], help="UCI data sets")
    parser.add_argument("--built-in", nargs="*", default=[], help="built-in data sets, as NAME:ARCHITECTURE")
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--fixed", nargs="*", type=float, default=[3e-3], help="fixed swag_lr values")
    parser.add_argument("--shares", nargs="*", type=float, default=[0.5, 1.0, 1.9], help="step_share values")
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=None, help="SWAG's batch_size (default: the method's own)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/swag_rate"))
    args = parser.parse_args(argv)
    header = run_header("benchmarks.swag_rate", argv)  # the commit whose code runs, before any later checkout
    rates = [{"swag_lr": value} for value in args.fixed] + [{"step_share": value} for value in args.shares]
    if args.datasets and args.uci_dir is None:
        parser.error(f"--datasets {' '.join(args.datasets)} are UCI data sets: give --uci-dir (or --datasets with "
                     "none, and built-in data sets as --built-in NAME:ARCHITECTURE)")

    def fits():  # each data set's split loaded once, a fresh network for each rate
        for dataset in [*args.datasets, *args.built_in]:
            for split in args.splits:
                data = load_data(args.uci_dir, dataset, split)
                for rate in rates:
                    yield fit_one(data, network(data, dataset, args.hidden), dataset, split, rate, args.batch_size)

    rows = printed_rows(fits())
    results = {"header": header, "rows": rows}
    write_results(args.out, results, markdown(results))
    return results


if __name__ == "__main__":
    main()
