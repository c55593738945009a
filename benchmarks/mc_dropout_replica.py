r"""MC dropout by its paper's protocol against a plain-torch replica of the paper's own network code, at the same settings.

The replica is ``net/net.py`` of yaringal/DropoutUncertaintyExps written in plain torch (:func:`replica`): inputs and
targets standardised with the training split (population standard deviations), ``Dropout(p)`` before each of the two
dense layers (50 ReLU units; ``n_hidden.txt``), Glorot-uniform kernels and zero biases, the mean squared error plus
:math:`\lambda \sum_l \lVert W_l\rVert^2` with :math:`\lambda = l^2 (1-p) / (2 N \tau)`, Adam at :math:`10^{-3}` on
shuffled minibatches of 128 for ``--epochs`` epochs; its predictive is ``--draws`` dropout passes, the test
log-likelihood of the mixture :math:`\log\frac1T\sum_t \mathcal N(y; \hat y_t, 1/\tau)` and the RMSE of the passes'
mean, in the target's units. The collection's fit is ``bnn uci``'s cell at the same rate, :math:`\tau` and epochs
(:func:`bnn.experiments.uci.protocol.fit_cell`, :mod:`bnn.inference.mc_dropout.uci_protocol`), without the grid search.
Both fit each split with seed ``split``; their random streams differ, so they agree in distribution, not draw for
draw: the table gives each split and the means over the splits.

It answers whether a gap between the collection's MC dropout and a published number is the collection's or the
protocol's: run at the paper's own settings (``--dropout-rate``, ``--tau``, ``--length-scale`` of its code), the
replica scores what that code scores here.

Usage::

    python -m benchmarks.mc_dropout_replica --uci-dir UCI_DIR --dataset yacht --splits 0 1 2 3 4 --epochs 400 \
        --dropout-rate 0.01 --tau 0.5 [--length-scale 0.01] [--draws 2000] [--out benchmarks/results/mc_dropout_replica]

It writes ``results.json`` (every number, the command, the commit and the machine) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import warnings
from pathlib import Path

import numpy as np
import torch
from bnn.datasets.uci import read_uci_table
from bnn.inference.evaluation.metrics import evaluate
from bnn.inference.mc_dropout.uci_protocol import LENGTH_SCALE, PAPER_OPTIONS

from benchmarks.provenance import header_line, printed_rows, run_header, write_results
from bnn.experiments.uci.grid import hidden_units
from bnn.experiments.uci.protocol import fit_cell
from bnn.runtime.seeding import seeded
from bnn.runtime.workers import one_torch_thread

BATCH_SIZE, LEARNING_RATE = 128, 1e-3


def replica(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, hidden: int, epochs: int, rate: float,
            tau: float, length_scale: float, draws: int, seed: int) -> dict[str, float]:
    """The paper's ``net.py`` in plain torch on one split (module notes): its test RMSE and log-likelihood."""
    x_mean, x_std = x.mean(0), np.where(x.std(0) == 0, 1.0, x.std(0))
    y_mean, y_std = y.mean(), y.std()
    inputs = torch.as_tensor((x - x_mean) / x_std, dtype=torch.float32)
    targets = torch.as_tensor((y - y_mean) / y_std, dtype=torch.float32).unsqueeze(-1)
    with seeded(seed):
        first, second = torch.nn.Linear(x.shape[1], hidden), torch.nn.Linear(hidden, 1)
        for layer in (first, second):
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
        drop = torch.nn.Dropout(rate)

        def network(values: torch.Tensor) -> torch.Tensor:
            return second(drop(torch.relu(first(drop(values)))))

        decay = length_scale ** 2 * (1 - rate) / (2 * len(inputs) * tau)
        optimiser = torch.optim.Adam([*first.parameters(), *second.parameters()], lr=LEARNING_RATE)
        for _ in range(epochs):
            for batch in torch.randperm(len(inputs)).split(BATCH_SIZE):
                loss = ((network(inputs[batch]) - targets[batch]) ** 2).mean()
                loss = loss + decay * (first.weight.pow(2).sum() + second.weight.pow(2).sum())
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        with torch.no_grad():
            test = torch.as_tensor((x_test - x_mean) / x_std, dtype=torch.float32)
            passes = torch.stack([network(test)[:, 0] for _ in range(draws)]).double().numpy() * y_std + y_mean
    log_density = (np.logaddexp.reduce(-0.5 * tau * (y_test[None] - passes) ** 2, axis=0) - math.log(draws)
                   - 0.5 * math.log(2 * math.pi) + 0.5 * math.log(tau))
    return {"rmse": float(np.sqrt(((y_test - passes.mean(0)) ** 2).mean())), "test_ll": float(log_density.mean())}


def run_split(uci_dir: Path, dataset: str, split: int, epochs: int, rate: float, tau: float, length_scale: float,
              draws: int) -> dict:
    """The collection's MC dropout and the replica on one split, at the same settings."""
    table = read_uci_table(uci_dir, dataset, [split])
    hidden = hidden_units(uci_dir / dataset)
    data = table.split(split)
    options = {**PAPER_OPTIONS, "num_samples": draws, "epochs": epochs, "dropout_rate": rate, "noise_precision": tau,
               "progress": False, "seed": split}
    with one_torch_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = evaluate(fit_cell("mc-dropout", data, hidden, options), data)
        theirs = replica(*table.arrays(split), hidden, epochs, rate, tau, length_scale, draws, split)
    return {"dataset": dataset, "split": split, "epochs": epochs, "dropout_rate": rate, "tau": tau,
            "length_scale": length_scale, "ours_rmse": ours["test_rmse"], "ours_test_ll": ours["test_ll"],
            "replica_rmse": theirs["rmse"], "replica_test_ll": theirs["test_ll"]}


def markdown(results: dict) -> str:
    """A row per split, then the means."""
    header, rows = results["header"], results["rows"]
    lines = ["# MC dropout by its paper's protocol against a replica of the paper's code", "",
             (__doc__ or "").split("Usage::")[0].strip(), "",
             header_line(header), "",
             "| data set | split | epochs | p | tau | l | ours: RMSE | ours: test LL | replica: RMSE | replica: test LL |",
             "|" + " --- |" * 10]
    for row in rows:
        lines.append(f"| {row['dataset']} | {row['split']} | {row['epochs']} | {row['dropout_rate']:g} | {row['tau']:g} | "
                     f"{row['length_scale']:g} | {row['ours_rmse']:.3f} | {row['ours_test_ll']:.3f} | "
                     f"{row['replica_rmse']:.3f} | {row['replica_test_ll']:.3f} |")
    means = {key: statistics.fmean(row[key] for row in rows)
             for key in ("ours_rmse", "ours_test_ll", "replica_rmse", "replica_test_ll")}
    lines.append(f"| mean of {len(rows)} | | | | | | {means['ours_rmse']:.3f} | {means['ours_test_ll']:.3f} | "
                 f"{means['replica_rmse']:.3f} | {means['replica_test_ll']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mc_dropout_replica", description=__doc__.split("\n")[0])
    parser.add_argument("--uci-dir", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=400)
    parser.add_argument("--dropout-rate", type=float, required=True)
    parser.add_argument("--tau", type=float, required=True, help="the noise precision, in the target's units")
    parser.add_argument("--length-scale", type=float, default=LENGTH_SCALE, help="the replica's l (the paper's code)")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/mc_dropout_replica"))
    args = parser.parse_args(argv)
    header = run_header("benchmarks.mc_dropout_replica", argv)
    rows = printed_rows(run_split(args.uci_dir, args.dataset, split, args.epochs, args.dropout_rate, args.tau,
                                  args.length_scale, args.draws) for split in args.splits)
    results = {"header": header, "rows": rows}
    write_results(args.out, results, markdown(results))
    return results


if __name__ == "__main__":
    main()
