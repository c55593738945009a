"""The command line shared by the benchmarks that measure a method's own check on healthy and broken fits
(``benchmarks.map_check``, ``benchmarks.mc_dropout_check``): a data set, its network, the variants to fit and the CSV
their rows are merged into."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from bnn.datasets import load_dataset
from bnn.datasets.dataset import Dataset
from bnn.models.network import BayesianNetwork

from benchmarks.provenance import merged_rows, run_header, run_lines
from benchmarks.training_cost import build_network
from bnn.runtime.atomic import atomic_file


class CheckRun(NamedTuple):
    """What a check benchmark's command line chose: its parsed ``args``, the ``variants`` in order, the ``dataset``,
    the network's ``architecture`` and the ``model``; and the run's ``header`` (command, commit, machine, date)."""

    args: argparse.Namespace
    variants: list[str]
    dataset: Dataset
    architecture: str
    model: BayesianNetwork
    header: dict[str, str]


def check_parser(module: str, doc: str, variants: dict, csv: Path) -> argparse.ArgumentParser:
    """The shared options of ``python -m <module>``: ``--dataset``, ``--model``, ``--uci-dir``, ``--variants`` (from
    ``variants``) and ``--csv`` (default ``csv``); the caller adds its own."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--model", default="mlp", help="an architecture with command-line flags (mlp, cnn)")
    parser.add_argument("--uci-dir", type=Path, help="read --dataset from the UCI benchmark (split 0)")
    parser.add_argument("--variants", default=",".join(variants))
    parser.add_argument("--csv", type=Path, default=csv, help="the CSV the rows are merged into")
    return parser


def parse_check_run(parser: argparse.ArgumentParser, variants: dict, argv: list[str] | None) -> CheckRun:
    """Parse ``argv``, refuse an unknown variant, load the data set and build its network (the UCI grid's MLP on a UCI
    set); make the CSV's folder and the run's header."""
    args = parser.parse_args(argv)
    chosen = [name for name in args.variants.split(",") if name]
    for name in chosen:
        if name not in variants:
            parser.error(f"unknown variant {name!r}: choose from {', '.join(variants)}")
    dataset = load_dataset(args.dataset, uci_dir=args.uci_dir)
    architecture = "mlp" if args.uci_dir is not None else args.model
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    return CheckRun(args, chosen, dataset, architecture, build_network(dataset, architecture, args.uci_dir),
                    run_header(parser.prog.removeprefix("python -m "), argv))


def keep_row(rows: list[dict[str, Any]], row: dict[str, Any], columns: list[str], csv: Path, line: str) -> pd.DataFrame:
    """Append ``row`` to ``rows``, print ``line`` and merge the rows so far into ``csv`` (replacing its rows of the same
    data set, model, variant and seed), atomically: a run cut short keeps its finished fits. Return the merged table."""
    rows.append(row)
    print(line, flush=True)
    table = merged_rows(rows, columns, csv, ("dataset", "model", "variant", "seed"))
    with atomic_file(csv) as handle:
        table.to_csv(handle, index=False)
    return table


def listed(values: Iterable[float], spec: str) -> str:
    """A table cell of one value per fit, each formatted by ``spec`` (``".3f"``), in order."""
    return ", ".join(format(value, spec) for value in values)


def with_runs(tables: str, frame: pd.DataFrame) -> str:
    """``tables`` followed by the run lines of ``frame``'s rows (:func:`~benchmarks.provenance.run_lines`)."""
    return tables + "\n\nRuns:\n\n" + "\n".join(run_lines(frame.to_dict("records"))) + "\n"
