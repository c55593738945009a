"""Two fits at once on one machine: the wall time of a ``bnn`` command alone and beside a copy of itself, by torch
thread setting.

Each setting runs the command ``--repeats`` times alone and ``--repeats`` times as a pair started together (each
copy writing its own folder), in the environment the setting names (``OMP_NUM_THREADS=2`` is torch's own default on
this 2-core machine; an empty setting leaves the environment alone, so the library chooses). A row gives the median
wall seconds of one command alone and of the slower of a pair, and their ratio.

Usage::

    python -m benchmarks.thread_contention --settings "OMP_NUM_THREADS=2; " --repeats 3 -- \\
        bnn fit --uci-dir ../shared/data/uci --dataset concrete --split 0 --method laplace --no-tune-prior-precision
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


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
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    print("| setting | alone s (median) | pair s (median) | pair / alone |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for setting in (part.strip() for part in args.settings.split(";")):
            environment = environment_of(setting)
            alone = statistics.median(run_together(command, 1, environment, Path(scratch)) for _ in range(args.repeats))
            pair = statistics.median(run_together(command, 2, environment, Path(scratch)) for _ in range(args.repeats))
            print(f"| {setting or '(library default)'} | {alone:.1f} | {pair:.1f} | {pair / alone:.2f} |", flush=True)


if __name__ == "__main__":
    main()
