"""A UCI run's folder: one result file per cell, written atomically as the cell finishes, found again by a rerun.

``<out>/cells/<data set>/<method>/split-<K>.json`` holds the cell's result (:data:`~bnn.experiments.uci.protocol.COLUMNS`),
its fingerprint: a SHA-256 of everything that decides its numbers (the data set's table, the split's rows, the
hidden width, the method's options with the seed, the options chosen on validation and their candidates), and the
machine that wrote it (:func:`~bnn.runtime.machine.machine`: torch's version and CPU kernels, which a sampler's last
digits depend on; not in the fingerprint, so a run resumed on another machine keeps its cells). A rerun
keeps a finished cell with the same fingerprint, runs again a failed one (with a warning when its settings or data
changed since: the fix of a cell that failed for bad data), and refuses, before any work, a folder whose finished cells
were made with other settings, and a cell file that is not one (tampered, truncated, a folder), naming it.

The folder is a run folder of ``bnn uci`` (:mod:`bnn.runtime.run_folder`): marked as such, locked while a run writes,
and holding only :data:`RUN_ENTRIES`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bnn.datasets.uci import UCITable
from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import COLUMNS
from bnn.experiments.uci.table import RESULTS_FILE, TABLE_FILE
from bnn.runtime.atomic import finite_or_null, write_json
from bnn.runtime.machine import machine
from bnn.runtime.stacklevel import user_stacklevel

CELLS_FOLDER = "cells"
RUN_ENTRIES = {CELLS_FOLDER, RESULTS_FILE, TABLE_FILE}
"""What a run of ``bnn uci`` writes into its folder (beside the marker and the lock)."""
STATUSES = ("ok", "failed")


def unmarked_run(folder: Path) -> bool:
    """Whether an unmarked ``folder`` holding only :data:`RUN_ENTRIES` is a run made before runs were marked: it has
    its ``cells`` folder."""
    return (folder / CELLS_FOLDER).is_dir()


def fingerprint(table: UCITable, cell: Cell) -> str:
    """SHA-256 of what decides ``cell``'s numbers (module notes)."""
    digest = hashlib.sha256()
    train, test = table.splits[cell.split]
    for array in (table.data, table.features, np.array([table.target]), train, test):
        values = np.ascontiguousarray(array)
        digest.update(f"{values.dtype}{values.shape}".encode())
        digest.update(values.tobytes())
    settings = {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "hidden": cell.hidden,
                "options": cell.options, "validation": cell.validation}
    if cell.conformal is not None:  # a second fit's numbers; a run without them keeps its fingerprints
        settings["conformal"] = cell.conformal
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def result_digest(result: dict[str, Any]) -> str:
    """SHA-256 of a cell's result as JSON, its keys sorted."""
    return hashlib.sha256(json.dumps(result, sort_keys=True, allow_nan=False).encode()).hexdigest()


def is_cell_file(stored: Any) -> bool:
    """Whether ``stored`` (a parsed JSON file) has the shape :meth:`RunFolder.write` gives a cell file."""
    result = stored.get("result") if isinstance(stored, dict) else None
    return (isinstance(result, dict) and isinstance(stored.get("fingerprint"), str) and set(COLUMNS) <= set(result)
            and result["status"] in STATUSES)


class RunFolder:
    """The cells of a UCI run kept in ``out`` (module notes)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)

    def path(self, cell: Cell) -> Path:
        """The result file of ``cell``."""
        return self.out / CELLS_FOLDER / cell.dataset / cell.method / f"split-{cell.split}.json"

    def read(self, cell: Cell) -> dict[str, Any] | None:
        """The stored file of ``cell`` (``result`` and ``fingerprint``), ``None`` when there is none.

        Raises
        ------
        ValueError
            When the file is not a cell file of ``bnn uci`` (not JSON, another shape, a folder), naming it.
        """
        path = self.path(cell)
        if not path.exists():
            return None
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{path} is not a cell file of bnn uci ({error}); remove it to run that cell again") from None
        if not is_cell_file(stored):
            raise ValueError(f"{path} is not a cell file of bnn uci (it needs a fingerprint and a result with the fields "
                             f"{', '.join(COLUMNS)}, status {' or '.join(STATUSES)}); remove it to run that cell again")
        if "digest" in stored and stored["digest"] != result_digest(stored["result"]):
            raise ValueError(f"{path} was changed after bnn uci wrote it: its result does not have the SHA-256 its "
                             "'digest' gives; remove it to run that cell again")
        return stored

    def finished(self, cell: Cell, print_: str) -> dict[str, Any] | None:
        """The result of ``cell`` when a run with fingerprint ``print_`` finished it, else ``None`` (none yet, or failed).

        Raises
        ------
        ValueError
            When the folder holds the cell made with other settings.
        """
        stored = self.read(cell)
        if stored is None:
            return None
        failed = stored["result"]["status"] != "ok"
        if stored["fingerprint"] != print_:
            if not failed:
                raise ValueError(f"{self.out} holds {cell.name} made with other settings (options, seed, data or split "
                                 "rows differ); rerun with the same options, or choose another --out for these")
            warnings.warn(f"{cell.name} failed in an earlier run with other settings or data; it runs again with these",
                          UserWarning, stacklevel=user_stacklevel())
        return None if failed else stored["result"]

    def write(self, cell: Cell, print_: str, result: dict[str, Any]) -> None:
        """Keep ``result`` of ``cell`` with the machine that made it (atomically: a kill leaves the old file or the new
        one)."""
        path = self.path(cell)
        path.parent.mkdir(parents=True, exist_ok=True)
        written = json.loads(json.dumps(finite_or_null(result), default=float))  # the result as JSON reads it back
        write_json(path, {"fingerprint": print_, "machine": machine(), "result": written,
                          "digest": result_digest(written)})
