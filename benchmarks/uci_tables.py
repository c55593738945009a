"""The UCI results files' tables, from the committed cells alone, by ``bnn uci``'s own writer.

``bnn uci`` writes ``results.csv`` (one row per cell) and ``table.md`` (:func:`bnn.experiments.uci.table.markdown`);
the grid's cells are committed as ``benchmarks/results/uci/results.csv`` and other runs' beside it. These functions
give a results file the writer's tables of such a file, whole or a choice of its sections (``## `` headings), with
nothing fitted: :func:`headline_tables` for ``uci.md``, :func:`every_table` for ``uci/table.md``,
:func:`side_tables` for the runs beside the grid's and :func:`smoke_tables` (its cells alone) for ``uci_smoke.md``.

Usage::

    python -m benchmarks.uci_tables benchmarks/results/uci/results.csv   # print the writer's table.md of the cells
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from bnn.experiments.uci.table import markdown

HEADLINE = ("Test RMSE", "Test log-likelihood", "The chains' agreement", "MC dropout against")
"""The sections of the writer's ``table.md`` that ``uci.md`` shows (the first words of their headings)."""
BEATS = "\nMean test log-likelihood above"
"""Where the writer's count of the data sets each method beats MC dropout's published number on starts."""


def cells(path: Path) -> pd.DataFrame:
    """A file of cells in ``results.csv``'s layout."""
    return pd.read_csv(path)


def sections(path: Path, wanted: tuple[str, ...] | None = None, level: str = "##", beats: bool = False) -> str:
    """The sections of the writer's ``table.md`` of the cells in ``path`` whose headings start with one of ``wanted``
    (every section where ``None``), their headings at ``level``, a blank line after each; the title and the lines
    before the first section left out. The count of the data sets each method beats MC dropout's published number on
    follows them with ``beats`` (where ``wanted`` is ``None``, it stays where the writer puts it)."""
    text = markdown(cells(path))
    start = text.index(BEATS)
    end = text.index("\n## ", start) if wanted is not None else start
    count, text = text[start + 1:end], text[:start + 1] + text[end + 1:] if wanted is not None else text
    found = text.split("\n## ")[1:]
    kept = [part.rstrip("\n") + "\n" for part in found if wanted is None or part.startswith(wanted)]
    return "\n".join([f"{level} {part}" for part in kept] + ([count.rstrip("\n") + "\n"] if beats and wanted else []))


def headline_tables(path: Path) -> str:
    """``uci.md``'s tables: the writer's metric, agreement and MC dropout sections of the grid's cells."""
    return sections(path, HEADLINE, beats=True)


def cost_table(path: Path) -> str:
    """The median seconds of a finished cell, by method and data set (the comparison report's
    :func:`~bnn.experiments.comparison.report.markdown_table`)."""
    from bnn.experiments.comparison.report import markdown_table

    finished = cells(path).query("status == 'ok'")
    seconds = finished.pivot_table("seconds", "method", "dataset", aggfunc="median")
    return f"## Median seconds a cell, by method (one torch thread; loaded machine: upper bounds)\n\n{markdown_table(seconds)}\n"


def every_table(path: Path) -> str:
    """Every section of the writer's ``table.md`` of the grid's cells."""
    return sections(path)


def side_tables(batch32: Path, old_defaults: Path, conformal: Path) -> str:
    """The runs beside the grid's: SWAG and MultiSWAG at a batch of 32 rows, SGLD and SGHMC at their old defaults (the
    writer's metric and calibration sections, one heading level down), and the conformal intervals on yacht."""
    parts = [("SWAG and MultiSWAG at a batch of 32 rows (uci/swag_batch32.csv)", batch32,
              ("Test RMSE", "Test log-likelihood", "Calibration")),
             ("SGLD and SGHMC at their old defaults (uci/sgmcmc_old_defaults.csv)", old_defaults,
              ("Test RMSE", "Test log-likelihood")),
             ("Laplace and SVI with conformal intervals, yacht splits 0-9 (uci/conformal_yacht.csv)", conformal,
              ("Conformal",))]
    return "\n".join(f"## {title}\n\n{sections(path, wanted, level='###')}" for title, path, wanted in parts)


def smoke_tables(path: Path) -> str:
    """``uci_smoke.md``'s table: each cell of the smoke run, its first eight columns as the file holds them (the
    comparison report's :func:`~bnn.experiments.comparison.report.markdown_table`)."""
    from bnn.experiments.comparison.report import markdown_table

    every = pd.read_csv(path, dtype=str, keep_default_na=False).iloc[:, :8]
    return (f"## Every cell ({path.parent.name}/{path.name}, by data set; `seconds` is the cell's own time)\n\n"
            f"{markdown_table(every.set_index('dataset'))}\n")


if __name__ == "__main__":
    print(markdown(cells(Path(sys.argv[1]))), end="")
