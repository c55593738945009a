"""``run_uci``: the UCI benchmark grid (data sets x methods x splits) under the papers' protocol, resumable.

Every check comes before any work: the methods and their options, the data set folders and every file of the
chosen splits, the run folder's earlier cells (made with the same settings, else refused), Ray when it is asked for.
Each cell's result is written as it finishes (:class:`~bnn.experiments.uci.store.RunFolder`); a rerun of the same
command runs only the cells not finished (missing or failed), so an interruption loses only the cells in flight.
Cell ``(d, m, k)`` fits with seed ``seed + k``: the same numbers on every executor.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bnn.datasets.uci import UCITable, read_uci_table
from bnn.experiments.uci.grid import Cell, find_datasets, hidden_units, splits_of
from bnn.experiments.uci.local import run_local
from bnn.experiments.uci.protocol import failed_row
from bnn.experiments.uci.ray_cluster import import_ray, run_ray
from bnn.experiments.uci.store import RUN_ENTRIES, RunFolder, fingerprint, unmarked_run
from bnn.experiments.uci.table import TABLE_FILE, write_tables
from bnn.inference.fit import METHODS
from bnn.options import seed as parse_seed
from bnn.runtime.atomic import check_apart
from bnn.runtime.progress import progress_bar
from bnn.runtime.run_folder import check_run_folder, locked_run_folder
from bnn.runtime.stacklevel import user_stacklevel
from bnn.runtime.stop_signals import sigterm_as_keyboard_interrupt
from bnn.runtime.workers import available_cores

EXECUTORS = ("local", "ray")


def constant_columns(table: UCITable, split: int) -> list[int]:
    """The inputs that do not vary over split ``split``'s training rows (the standardiser's threshold), as positions
    among the inputs (from 0)."""
    x = table.arrays(split)[0]
    spread, centre = x.std(axis=0), x.mean(axis=0)
    return [int(c) for c in np.flatnonzero(spread <= 1e-12 * (1 + np.abs(centre)))]


def warn_constant_columns(table: UCITable) -> None:
    """Warn, once per data set, about inputs constant on a training split: they are standardised to 0, not divided
    by their zero spread, and carry no information on that split. The warning names their columns of ``data.txt``,
    counted from 0 as ``index_features.txt`` counts them, and points at the line that called the runner
    (:func:`warning_stacklevel`)."""
    found = {split: [int(table.features[c]) for c in constant_columns(table, split)] for split in table.splits}
    found = {split: columns for split, columns in found.items() if columns}
    if found:
        where = "; ".join(f"split {split}: column{'s' if len(columns) > 1 else ''} {', '.join(map(str, columns))}"
                          for split, columns in found.items())
        warnings.warn(f"{table.name}: inputs constant on the training rows ({where} of data.txt, counted from 0 as "
                      "index_features.txt counts them) are set to 0 after standardising (scale 1 instead of their zero "
                      "spread), so they carry nothing on those splits", UserWarning, stacklevel=warning_stacklevel())


def warning_stacklevel() -> int:
    """``warnings.warn``'s ``stacklevel``, for the caller of this function, that points at the user's line that called
    into the package (:func:`~bnn.runtime.stacklevel.user_stacklevel`), unless that line is the ``bnn`` command's
    launcher (the console script, ``python -m bnn``), which tells its reader nothing: then at the package's line that
    warns."""
    level = user_stacklevel() - 1  # counted from this function's caller, as sys._getframe counts from this function
    try:
        user = sys._getframe(level)
    except ValueError:  # no frame outside the package
        return level
    script = Path(user.f_code.co_filename)
    launcher = user.f_globals.get("__name__") == "__main__" and (
        script.name == "bnn" or (script.name == "__main__.py" and script.parent.name == "bnn"))
    return 1 if launcher else level


def method_options(methods: Sequence[str], overrides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each method's fit options: the protocol's, then the user's; checked by the method's own parser now.

    Raises
    ------
    ValueError
        For an unknown method, options given for a method not in the run, a seed (the grid's ``seed`` sets the
        cells'), or an option the method refuses.
    """
    stray = sorted(set(overrides) - set(methods))
    if stray:
        raise ValueError(f"--set names method(s) {stray} that are not in --methods {list(methods)}")
    seeded = sorted(method for method, chosen in overrides.items() if "seed" in chosen)
    if seeded:
        raise ValueError(f"--set {seeded[0]}.seed: the cells' seeds come from --seed (the cell of split k fits with "
                         "seed + k); pass --seed instead")
    options = {}
    for method in methods:
        chosen = {**METHODS.get(method).uci.options, **overrides.get(method, {}), "progress": False}
        METHODS.get(method).options.parse(method, chosen)
        options[method] = chosen
    return options


def validation_grid(method: str, options: dict[str, Any], folder: Path) -> dict[str, list[float]]:
    """The options ``method`` chooses on a validation part of each training split of the data set in ``folder``, with
    their candidates (its protocol's :attr:`~bnn.inference.core.uci_protocol.UCIProtocol.validation`; empty when it
    has none or the user fixed them)."""
    choose = METHODS.get(method).uci.validation
    return {} if choose is None else choose(options, folder)


def folder_options(method: str, options: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The fit options ``method``'s protocol reads from the data set's ``folder``
    (:attr:`~bnn.inference.core.uci_protocol.UCIProtocol.folder_options`; empty when it has none); ``options``, the
    protocol's and the user's, win over them."""
    read = METHODS.get(method).uci.folder_options
    return {} if read is None else read(options, folder)


def execute(executor: str, tables: dict[str, UCITable], cells: list[Cell], workers: int, address: str | None,
            max_retries: int) -> Iterator[dict[str, Any]]:
    """The results of ``cells`` as the executor finishes them, on at most one worker a cell (nothing started when
    there are none); closing it ends the cells in flight."""
    if not cells:
        return
    workers = min(workers, len(cells))  # a worker more than the cells only starts a process that waits
    if executor == "local":
        yield from run_local(tables, cells, workers)
    else:
        yield from run_ray(tables, cells, workers, address, max_retries)


def run_uci(uci_dir: str | Path, datasets: str, methods: Sequence[str], splits: Sequence[int], out: str | Path, *,
            executor: str = "local", address: str | None = None, workers: int | None = None,
            overrides: dict[str, dict[str, Any]] | None = None, seed: int = 0, max_retries: int = 2,
            progress: bool = True, command: str | None = None, conformal: float | None = None) -> pd.DataFrame:
    """Run the grid, keeping each cell as it finishes, and write ``results.csv`` and ``table.md`` into ``out``.

    Parameters
    ----------
    uci_dir : str or Path
        A folder of data set folders in the benchmark's standard layout.
    datasets : str
        Comma-separated folder names, or ``"all"``.
    methods : sequence of str
        Names in :data:`~bnn.inference.fit.METHODS`.
    splits : sequence of int
        Split numbers; a data set with fewer runs those it has (with a warning).
    out : str or Path
        The run folder (resumable).
    executor : {"local", "ray"}
        Processes on this machine (loky), or tasks on a Ray cluster.
    address : str, optional
        The Ray cluster's address (``executor="ray"``); without it a local Ray cluster of ``workers`` cores starts.
    workers : int, optional
        Cells at once (local) or the local Ray cluster's cores (default: the cores this process may use).
    overrides : dict of str to dict, optional
        Fit options per method (``{"svi": {"steps": 500}}``); they win over the protocol's.
    seed : int
        Cell of split ``k`` fits with seed ``seed + k``.
    max_retries : int
        Ray only: retries of a failed or lost task before its cell is reported failed.
    progress : bool
        A progress bar over the grid (:mod:`bnn.runtime.progress`'s policy).
    command : str, optional
        The command line, written into ``table.md``.
    conformal : float, optional
        Also measure each cell's 90% conformal intervals, calibrated on this share of its training split, from a second
        fit on the rest (:func:`~bnn.experiments.uci.protocol.conformal_measures`: twice the fits); a cell's settings
        include it, so a run folder made without it (or with another share) is refused as made with other settings.

    Returns
    -------
    pandas.DataFrame
        ``results.csv``: one row per cell of the grid.

    Raises
    ------
    ValueError
        For anything wrong with the arguments, the data or ``out`` (module notes), before any work; after it, when every
        cell failed on bad input (:func:`refuse_bad_input`).
    ImportError
        For ``executor="ray"`` without Ray installed.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose from {list(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise ValueError("--address names a Ray cluster; pass --executor ray too")
    if executor == "ray":
        import_ray()
    workers = available_cores() if workers is None else workers
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be a whole number >= 0 (retries of a failed Ray task), got {max_retries!r}")
    if isinstance(methods, str) or not methods:
        raise ValueError(f"methods must be a non-empty list of names from {METHODS.names()}, got {methods!r}")
    if not splits or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in splits):
        raise ValueError(f"splits must be a non-empty list of split numbers (>= 0), got {splits!r}")
    if conformal is not None and (isinstance(conformal, bool) or not isinstance(conformal, (int, float))
                                  or not 0 < conformal < 1):
        raise ValueError(f"the conformal calibration share must lie in (0, 1), got {conformal!r}: use for example 0.2")
    parse_seed("seed (--seed)", seed)
    parse_seed(f"seed + split (split k fits with --seed + k; here {seed} + {max(splits)})", seed + max(splits))
    uci_dir, out = Path(uci_dir), Path(out)
    check_apart(out, {"--uci-dir": uci_dir})
    check_run_folder(out, "uci", RUN_ENTRIES, unmarked_run=unmarked_run)
    overrides = overrides or {}
    options = method_options(list(dict.fromkeys(methods)), overrides)
    tables, cells = {}, []
    for name in find_datasets(uci_dir, datasets):
        chosen = splits_of(uci_dir, name, sorted(set(splits)))
        tables[name] = read_uci_table(uci_dir, name, chosen)
        warn_constant_columns(tables[name])
        hidden = hidden_units(uci_dir / name)
        for method, protocol_options in options.items():
            fit_options = {**folder_options(method, protocol_options, uci_dir / name), **protocol_options}
            validation = validation_grid(method, fit_options, uci_dir / name)
            cells += [Cell(name, method, split, hidden, {**fit_options, "seed": seed + split}, validation,
                           overrides.get(method, {}), conformal) for split in chosen]
    with locked_run_folder(out, "uci", RUN_ENTRIES):
        results = run_cells(RunFolder(out), tables, cells, executor, workers, address, max_retries, progress)
        missing = "no result came back from the executor"
        frame = write_tables([results[cell] or failed_row(cell, missing, 0) for cell in cells], out, command)
    refuse_bad_input(frame, out)
    return frame


def refuse_bad_input(frame: pd.DataFrame, out: Path) -> None:
    """Raise ``ValueError`` when every cell of ``frame`` (``results.csv``) failed on bad input (a ``ValueError``: data a
    fit refuses, a network too big for memory): the grid's input is bad, as it would be for ``bnn fit``. The cells and
    the tables stay in ``out``; the same command runs the failed cells again."""
    bad = (frame["status"] == "failed") & frame["problems"].fillna("").str.startswith("ValueError: ")
    if len(frame) and bad.all():
        first = frame.iloc[0]
        raise ValueError(f"every cell failed on bad input, such as {first.dataset} / {first.method} / split {first.split}"
                         f": {first.problems.removeprefix('ValueError: ')} ({out / TABLE_FILE} lists each); fix it and run"
                         " the same command again")


def cell_verdict(result: dict[str, Any]) -> str:
    """What the progress line says of a finished cell: its verdict (``converged``, ``not converged``, ``no check``),
    or ``failed``."""
    return result["verdict"] if result["status"] == "ok" else "failed"


def running(todo: list[Cell], results: dict[Cell, dict[str, Any] | None], workers: int) -> str:
    """The cells of ``todo`` in flight, as the progress line names them: the first ``workers`` not finished, in the
    order they were handed to the executor (which starts them in that order)."""
    waiting = [cell.name for cell in todo if results[cell] is None][:workers]
    if not waiting:
        return ""
    more = f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""
    return "running " + ", ".join(waiting[:3]) + more


def run_cells(folder: RunFolder, tables: dict[str, UCITable], cells: list[Cell], executor: str, workers: int,
              address: str | None, max_retries: int, progress: bool) -> dict[Cell, dict[str, Any] | None]:
    """Each cell's result: kept from ``folder`` when finished with the same settings, else run (and kept there as it
    finishes); ``None`` for a cell whose result never came back. An interrupt raises ``KeyboardInterrupt`` naming what
    was kept.

    The progress bar names the cells in flight from the start (:func:`running`), and each cell as it finishes with
    its verdict (:func:`cell_verdict`), a new description each time: off a terminal, one line per finished cell
    (:mod:`bnn.runtime.progress`), not one per tenth of the grid, whose first can take many minutes."""
    prints = {cell: fingerprint(tables[cell.dataset], cell) for cell in cells}
    results = {cell: folder.finished(cell, prints[cell]) for cell in cells}
    todo = [cell for cell in cells if results[cell] is None]
    bar = progress_bar(total=len(cells), initial=len(cells) - len(todo), desc="uci grid", unit="cell", enabled=progress,
                       postfix=running(todo, results, workers))
    try:
        with sigterm_as_keyboard_interrupt():
            stream = execute(executor, tables, todo, workers, address, max_retries)
            by_key = {(cell.dataset, cell.method, cell.split): cell for cell in todo}
            with closing(stream):  # closed on any exit: the executor ends the cells in flight
                for result in stream:
                    cell = by_key[result["dataset"], result["method"], result["split"]]
                    folder.write(cell, prints[cell], result)
                    results[cell] = result
                    bar.set_description_str(f"uci grid, {cell.name} {cell_verdict(result)}", refresh=False)
                    bar.set_postfix_str(running(todo, results, workers), refresh=False)
                    bar.update()
    except KeyboardInterrupt as interrupt:
        raise KeyboardInterrupt(f"{str(interrupt) or 'Ctrl-C'}: the {sum(r is not None for r in results.values())} finished "
                                f"cells are kept in {folder.out}; the same command runs the rest") from None
    finally:
        bar.close()
    return results
