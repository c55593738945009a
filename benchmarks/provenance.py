"""Where a benchmark's numbers came from, and the files it leaves: the command, the commit, the machine and the date
in a header, every number in ``results.json`` (or a CSV) and its tables in ``results.md``.

A results file states each run that made its numbers on one line (:func:`header_line`). Its tables are regenerated
from the committed data alone (:mod:`benchmarks.results_tables`); a CSV of cells as they were printed is read back by
:func:`read_rows` (numbers as numbers, for a script's own row formatter) or :func:`cell_tables` (the text as printed).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import torch


def commit() -> str:
    """The checkout's short commit hash, or ``"unknown"`` outside a git checkout."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_header(module: str, argv: list[str] | None) -> dict[str, str]:
    """The command (``python -m module`` and its arguments: ``argv``, or the process's own), commit, machine (its
    GPU too, where torch sees one), date."""
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return {"command": " ".join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)]),
            "commit": commit(), "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores{gpu})",
            "date": datetime.now(UTC).date().isoformat()}


def printed_rows(rows: Iterable[dict]) -> list[dict]:
    """The rows, each printed as a JSON line as it comes (a long run shows its progress)."""
    kept = []
    for row in rows:
        kept.append(row)
        print(json.dumps(row), flush=True)
    return kept


def write_results(out: Path, results: dict, markdown: str) -> None:
    """``results.json`` and ``results.md`` into ``out`` (made if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown)


def run_lines(rows: Iterable[dict[str, str]]) -> list[str]:
    """The distinct :func:`header_line` of ``rows``, in their order: a results file's list of its runs."""
    return list(dict.fromkeys(header_line(row) for row in rows))


def merged_rows(rows: list[dict], columns: list[str], path: Path, keys: tuple[str, ...]) -> pd.DataFrame:
    """The CSV at ``path`` with ``rows`` (their ``columns``) in place of its rows that agree with one of them on
    ``keys``, the new rows last: a run of the same cells replaces them, the others are kept. The header columns are
    read as text."""
    new = pd.DataFrame(rows, columns=columns)
    if not path.is_file():
        return new
    old = pd.read_csv(path, dtype={key: str for key in ("command", "commit", "machine", "date")})
    replaced = set(zip(*(new[key] for key in keys)))
    kept = old[[cell not in replaced for cell in zip(*(old[key] for key in keys))]]
    return pd.concat([kept, new], ignore_index=True)


def header_line(header: dict[str, str]) -> str:
    """One run's line in a results file: ``- run: `COMMAND` at COMMIT on MACHINE, DATE`` (``unknown`` where a field
    is missing)."""
    command, commit, machine, date = (header.get(key) or "unknown" for key in ("command", "commit", "machine", "date"))
    return f"- run: `{command}` at {commit} on {machine}, {date}"


def parsed(text: str) -> int | float | str:
    """A printed cell read back: an integer, a float, or the text itself (empty stays empty)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: Path) -> list[dict]:
    """The rows of a CSV of printed cells, each value :func:`parsed`."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [{key: parsed(value) for key, value in row.items()} for row in frame.to_dict("records")]


def table_header(columns: list[str]) -> str:
    """The two header lines of a Markdown table of ``columns``."""
    return "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)


def printed_table(path: Path, columns: list[str]) -> str:
    """The Markdown table of a CSV of a script's printed rows, ``columns`` in order, every cell as printed."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)[columns]
    return "\n".join([table_header(columns), *("| " + " | ".join(cells) + " |" for cells in frame.values.tolist())]) + "\n"


def cell_tables(*paths: Path, by: str = "table") -> str:
    """The tables of CSV files of printed cells: one per value of a file's ``by`` column (in the order met), each under
    a ``## <value>`` heading, its first column as the row labels, every cell as printed (the comparison report's
    :func:`~bnn.experiments.comparison.report.markdown_table`). A file of several tables holds the union of their
    columns, in an order that keeps each table's own: a column empty in every row of a table is not one of its."""
    from bnn.experiments.comparison.report import markdown_table

    parts = []
    for path in paths:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        for title, rows in frame.groupby(by, sort=False):
            rows = rows.drop(columns=by)
            rows = rows.loc[:, [column for column in rows.columns if (rows[column] != "").any()]]
            parts.append(f"## {title}\n\n{markdown_table(rows.set_index(rows.columns[0]))}\n")
    return "\n".join(parts)


COMPARISON_COLUMNS = ["fit_seconds", "test_rmse", "test_ll", "coverage_50", "coverage_90", "loo_elpd", "loo_bad_k",
                      "r_hat_predictive", "divergences", "converged"]
"""The columns of a ``bnn compare`` run's ``comparison.csv`` that a results file shows."""


def comparison_tables(*paths: Path) -> str:
    """Each ``bnn compare`` run's ``comparison.csv`` as its report prints it (the comparison report's
    :func:`~bnn.experiments.comparison.report.markdown_table`), :data:`COMPARISON_COLUMNS` only, under a heading naming
    the run's folder."""
    from bnn.experiments.comparison.report import markdown_table

    parts = []
    for path in paths:
        frame = pd.read_csv(path, index_col=0)
        parts.append(f"## {path.parent.name}: every method at its defaults ({'/'.join(path.parts[-3:])})\n\n"
                     f"{markdown_table(frame[COMPARISON_COLUMNS])}\n")
    return "\n".join(parts)
