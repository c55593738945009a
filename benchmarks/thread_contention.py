"""Two fits at once on one machine: the wall time of a ``bnn`` command alone and beside a copy of itself, by torch
thread setting.

Each setting runs the command ``--repeats`` times alone and ``--repeats`` times as a pair started together (each
copy writing its own folder), in the environment the setting names (``OMP_NUM_THREADS=2`` is torch's own default on
this 2-core machine; an empty setting leaves the environment alone, so the library chooses). A row gives the median
wall seconds of one command alone and of the slower of a pair, and their ratio.

Usage::

    python -m benchmarks.thread_contention --settings "OMP_NUM_THREADS=2; " --repeats 3 [--csv rows.csv] -- \\
        bnn fit --uci-dir ../shared/data/uci --dataset concrete --split 0 --method laplace --no-tune-prior-precision

``--csv`` writes the rows, from which :func:`tables_from_csv` prints the table again.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from benchmarks.provenance import read_rows

COLUMNS = ("setting", "alone_s", "pair_s", "pair_over_alone")


def run_together(command: list[str], copies: int, environment: dict[str, str], folder: Path) -> float:
    """Start ``copies`` of ``command`` at once (each with its own ``--out``); the seconds until the last one ended."""
    start = time.perf_counter()
    processes = [subprocess.Popen([*command, "--quiet", "--out", str(folder / f"run-{copy}"), "--overwrite"],
                                  env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for copy in range(copies)]
    for process in processes:
        _, errors = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {errors}")
    return time.perf_counter() - start


def environment_of(setting: str) -> dict[str, str]:
    """The process environment with the setting's ``NAME=VALUE`` pairs (comma-separated) added."""
    environment = dict(os.environ)
    for pair in filter(None, (part.strip() for part in setting.split(","))):
        name, value = pair.split("=", 1)
        environment[name] = value
    return environment


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", required=True, help="';'-separated settings, each NAME=VALUE,... or empty")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--csv", type=Path, help="write the rows here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    print(HEADER, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for setting in (part.strip() for part in args.settings.split(";")):
            environment = environment_of(setting)
            alone = statistics.median(run_together(command, 1, environment, Path(scratch)) for _ in range(args.repeats))
            pair = statistics.median(run_together(command, 2, environment, Path(scratch)) for _ in range(args.repeats))
            rows.append(dict(zip(COLUMNS, (setting, alone, pair, pair / alone))))
            print(table_row(rows[-1]), flush=True)
    if args.csv is not None:
        pd.DataFrame(rows, columns=COLUMNS).to_csv(args.csv, index=False)


HEADER = "| setting | alone s (median) | pair s (median) | pair / alone |\n|---|---|---|---|"


def table_row(row: dict) -> str:
    """One setting's row: the medians alone and as a pair, and their ratio."""
    return (f"| {row['setting'] or '(library default)'} | {row['alone_s']:.1f} | {row['pair_s']:.1f} | "
            f"{row['pair_over_alone']:.2f} |")


def tables_from_csv(path: Path) -> str:
    """The table of a run from its ``--csv`` file alone."""
    return "\n".join([HEADER, *map(table_row, read_rows(path))]) + "\n"


if __name__ == "__main__":
    main()
