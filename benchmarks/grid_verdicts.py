r"""How often each method's own check flags the UCI grid's cells, before and after a change to the checks.

*Before* is a grid's ``results.csv`` as it stands (``benchmarks/results/uci/results.csv``); *after* the cells of one or
more ``bnn uci`` run folders, or of files of cells in the ``results.csv`` layout (the committed record of such runs),
the same cells fitted again at the code under test (``--runs``). Only the cells in both are counted, so each fraction
compares the same splits; per method and data set it prints the cells flagged (the verdict ``not converged``) before
and after, and the mean test log-likelihood of both, then the same counts per method over all its data sets.
The cells of deliberately broken fits (``--broken``: a MAP stopped after 10 Adam steps and 10 polish iterations, SVI
stopped after 100 steps, run with ``bnn uci --set``) are counted by method and by the options that broke them: a check
worth having flags every one. ``--save-runs`` and ``--save-broken`` write the cells read to files in the grid's
layout, the record to commit (a later source's cell replaces an earlier one's, so a file can be extended in place).

Usage::

    python -m benchmarks.grid_verdicts --runs runs/after-small benchmarks/results/uci/grid_after.csv --broken runs/broken
    python -m benchmarks.grid_verdicts --runs benchmarks/results/uci/grid_after.csv runs/after-kin8nm \
        --save-runs benchmarks/results/uci/grid_after.csv
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd

from bnn.experiments.comparison.report import markdown_table

FLAGGED = "not converged"
GRID = Path(__file__).parent / "results" / "uci" / "results.csv"


def source_rows(source: Path) -> list[dict]:
    """The result of every cell in ``source``: a ``bnn uci`` run folder, or a ``.csv`` file of cells."""
    if source.suffix == ".csv":
        return pd.read_csv(source, keep_default_na=False).to_dict("records")
    return [json.loads(path.read_text())["result"] for path in sorted(source.glob("cells/*/*/*.json"))]


def run_cells(sources: list[Path]) -> dict[tuple[str, str, int], dict]:
    """The result of every cell in ``sources``, by (data set, method, split); a later source's cell replaces an
    earlier one's."""
    return {(row["dataset"], row["method"], int(row["split"])): row for source in sources for row in source_rows(source)}


def flagged_fractions(before: pd.DataFrame, after: dict[tuple[str, str, int], dict]) -> pd.DataFrame:
    """Per method and data set, over the finished cells present in both: the cells, those flagged before and after,
    and the mean test log-likelihood before and after."""
    rows = {}
    for old in before.to_dict("records"):
        key = (old["dataset"], old["method"], int(old["split"]))
        new = after.get(key)
        if new is None or old["status"] != "ok" or new["status"] != "ok":
            continue
        rows.setdefault((old["method"], old["dataset"]), []).append((old, new))
    table = [{"method": method, "dataset": dataset, "cells": len(pairs),
              "flagged_before": sum(old["verdict"] == FLAGGED for old, _ in pairs),
              "flagged_after": sum(new["verdict"] == FLAGGED for _, new in pairs),
              "test_ll_before": statistics.fmean(float(old["test_ll"]) for old, _ in pairs),
              "test_ll_after": statistics.fmean(float(new["test_ll"]) for _, new in pairs)}
             for (method, dataset), pairs in sorted(rows.items())]
    return pd.DataFrame(table, columns=["method", "dataset", "cells", "flagged_before", "flagged_after",
                                        "test_ll_before", "test_ll_after"])


def method_totals(fractions: pd.DataFrame) -> pd.DataFrame:
    """Per method, over all its data sets: the cells, and those flagged before and after."""
    return fractions.groupby("method").agg(datasets=("dataset", "count"), cells=("cells", "sum"),
                                           flagged_before=("flagged_before", "sum"),
                                           flagged_after=("flagged_after", "sum")).reset_index()


def broken_verdicts(cells: list[dict]) -> pd.DataFrame:
    """The broken fits' ``cells``, per method and the options that broke them (as the cell's ``selection`` names them):
    the data sets, the cells and how many were flagged."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in cells:
        groups.setdefault((row["method"], row["selection"].partition("set by the user: ")[2]), []).append(row)
    rows = [{"method": method, "set": broken_by, "datasets": ", ".join(sorted(row["dataset"] for row in cells)),
             "cells": len(cells), "flagged": sum(row["verdict"] == FLAGGED for row in cells)}
            for (method, broken_by), cells in groups.items()]
    return pd.DataFrame(rows, columns=["method", "set", "datasets", "cells", "flagged"])


def save_cells(rows: list[dict], columns: list[str], path: Path) -> None:
    """Write ``rows`` to ``path`` as a file of cells with the grid's ``columns``: whole or not at all (a temporary file
    renamed over it), so a file that is also a source is read before it is replaced."""
    temporary = path.with_name(path.name + ".tmp")
    pd.DataFrame(rows).reindex(columns=columns).to_csv(temporary, index=False)
    temporary.replace(path)


def main(argv: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grid_verdicts", description=__doc__.split("\n")[0])
    parser.add_argument("--grid", type=Path, default=GRID, help="the grid's results.csv (before)")
    parser.add_argument("--runs", type=Path, nargs="+", required=True,
                        help="bnn uci run folders, or .csv files of cells (after)")
    parser.add_argument("--broken", type=Path, nargs="*", default=[],
                        help="bnn uci run folders, or .csv files of cells, of broken fits")
    parser.add_argument("--save-runs", type=Path, help="write the runs' cells to this .csv (by method, data set, split)")
    parser.add_argument("--save-broken", type=Path, help="write every broken fit's cell to this .csv")
    args = parser.parse_args(argv)
    grid = pd.read_csv(args.grid, keep_default_na=False)
    after = run_cells(args.runs)
    fractions = flagged_fractions(grid, after)
    broken_cells = [row for source in args.broken for row in source_rows(source)]
    broken = broken_verdicts(broken_cells)
    if args.save_runs:
        ordered = sorted(after.values(), key=lambda row: (row["method"], row["dataset"], int(row["split"])))
        save_cells(ordered, list(grid.columns), args.save_runs)
    if args.save_broken:
        save_cells(broken_cells, list(grid.columns), args.save_broken)
    print(tables(fractions, broken), end="")
    return fractions, broken


HEADINGS = ("The cells flagged before and after, by method and data set (test LL: the mean over the cells)",
            "The cells flagged before and after, by method over its data sets",
            "Broken fits, split 0 of each set, by method and the options that broke them")


def tables(fractions: pd.DataFrame, broken: pd.DataFrame, headings: bool = False) -> str:
    """The cells flagged before and after per method and data set, then per method, then the broken fits (if any);
    with ``headings``, each under a heading (:data:`HEADINGS`)."""
    parts = [markdown_table(fractions.set_index("method")), markdown_table(method_totals(fractions).set_index("method"))]
    if len(broken):
        parts.append(markdown_table(broken.set_index("method")))
    if headings:
        parts = [f"## {heading}\n\n{part}" for heading, part in zip(HEADINGS, parts)]
    return "\n\n".join(parts) + "\n"


ADDED_SINCE = ("csgld", "swag", "multiswag")
"""The grid's methods added after the checks changed (2026-12-03 on)."""
SG_MCMC = ("sgld", "sghmc")


def tables_from_csv(grid: Path, old_sg_mcmc: Path, rerun: Path, after: Path, sg_mcmc_after: Path, broken: Path) -> str:
    """The tables of the committed cells alone: the grid as it stood when the checks changed is ``grid`` (the
    grid's ``results.csv``) with the cells of that time that were run again since (``rerun``) in place of today's,
    without the methods added since and with the SG-MCMC cells of that time (``old_sg_mcmc``, their old defaults) in
    place of today's; after, the cells of ``after`` and ``sg_mcmc_after``; and the broken fits."""
    key = ["dataset", "method", "split"]
    now, earlier = (pd.read_csv(path, keep_default_na=False) for path in (grid, rerun))
    kept = now[~now.set_index(key).index.isin(earlier.set_index(key).index)]
    then = pd.concat([kept, earlier])
    before = pd.concat([then[~then["method"].isin(ADDED_SINCE + SG_MCMC)], pd.read_csv(old_sg_mcmc, keep_default_na=False)])
    return tables(flagged_fractions(before, run_cells([after, sg_mcmc_after])), broken_verdicts(source_rows(broken)),
                  headings=True)


if __name__ == "__main__":
    main()
