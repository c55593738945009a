"""A UCI run's folder: one result file per cell, written atomically as the cell finishes, found again by a rerun.

``<out>/cells/<data set>/<method>/split-<K>.json`` holds the cell's result (:data:`~bnn.inference.uci.protocol.COLUMNS`)
and its fingerprint: a SHA-256 of everything that decides its numbers (the data set's table, the split's rows, the
hidden width, the method's options with the seed, the options chosen on validation and their candidates). A rerun
keeps a finished cell with the same fingerprint, runs again a failed one, and refuses, before any work, a folder
whose cells were made with other settings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from bnn.datasets.uci import UCITable
from bnn.inference.uci.grid import Cell

from bnn.runtime.atomic import write_json

CELLS_FOLDER = "cells"


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
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


class RunFolder:
    """The cells of a UCI run kept in ``out`` (module notes)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)

    def path(self, cell: Cell) -> Path:
        """The result file of ``cell``."""
        return self.out / CELLS_FOLDER / cell.dataset / cell.method / f"split-{cell.split}.json"

    def read(self, cell: Cell) -> dict[str, Any] | None:
        """The stored file of ``cell`` (``result`` and ``fingerprint``), ``None`` when there is none."""
        path = self.path(cell)
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError as error:
            raise ValueError(f"{path} is not a result file of bnn uci ({error}); remove it to run that cell again") from None

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
        if stored.get("fingerprint") != print_:
            raise ValueError(f"{self.out} holds {cell.name} made with other settings (options, seed, data or split "
                             "rows differ); rerun with the same options, or choose another --out for these")
        return stored["result"] if stored["result"]["status"] == "ok" else None

    def write(self, cell: Cell, print_: str, result: dict[str, Any]) -> None:
        """Keep ``result`` of ``cell`` (atomically: a kill leaves the old file or the new one)."""
        path = self.path(cell)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {"fingerprint": print_, "result": result})
