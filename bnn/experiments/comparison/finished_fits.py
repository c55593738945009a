"""The fits of a ``compare`` run, each kept on disk as it finishes, for a rerun of the same command to reuse.

They live in ``<out>.partial-fits/<fingerprint>/``, one saved posterior per fit (written atomically, so a kill leaves
a fit whole or absent), beside ``--out``, which still appears complete or not at all. The fingerprint is a SHA-256 of
everything that decides a fit's numbers: the model, the data (the arrays themselves), the methods and their options,
the seed. A different command has another fingerprint, so it never reuses them; the folder goes once the report is
written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.runtime.atomic import result_state, write_json

FINGERPRINT_FILE = "fingerprint.json"


def data_digest(dataset: Dataset) -> str:
    """SHA-256 of the data set's name and its four arrays (values, shapes and types)."""
    digest = hashlib.sha256(dataset.name.encode())
    for array in (dataset.x_train, dataset.y_train, dataset.x_test, dataset.y_test):
        values = np.ascontiguousarray(array.detach().cpu().numpy())
        digest.update(f"{values.dtype}{values.shape}".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


def run_fingerprint(model, dataset: Dataset, fits: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What decides the numbers of a ``compare`` run: the model's configuration, the data's digest and each fit's
    method and options (the seed among them; the ``progress`` switch left out)."""
    return {
        "model": model.config(), "data": data_digest(dataset),
        "fits": [{"method": method, "options": {k: v for k, v in sorted(options.items()) if k != "progress"}}
                 for method, options in fits],
    }


class FinishedFits:
    """The finished fits of one ``compare`` command (one fingerprint), kept beside its ``--out``.

    Parameters
    ----------
    out : Path
        The report folder of the command.
    fingerprint : dict
        :func:`run_fingerprint` of the command.
    module : torch.nn.Module, optional
        The module of the command's network when it was made from one: a kept fit is rebuilt with it, never by
        unpickling (:meth:`~bnn.inference.core.posterior.Posterior.load`).
    """

    def __init__(self, out: Path, fingerprint: dict[str, Any], module: nn.Module | None = None) -> None:
        self.module = module
        self.fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True, default=str))
        key = hashlib.sha256(json.dumps(self.fingerprint, sort_keys=True).encode()).hexdigest()[:16]
        self.root = out.with_name(f"{out.name}.partial-fits")
        self.folder = self.root / key

    def path(self, index: int, method: str) -> Path:
        """The folder of the ``index``-th fit (from 0), a ``method`` fit."""
        return self.folder / f"{index + 1:02d}-{method}"

    def load(self, index: int, method: str) -> Posterior | None:
        """The ``index``-th fit when a run of the same command finished it, else ``None``."""
        path = self.path(index, method)
        try:
            same = json.loads((self.folder / FINGERPRINT_FILE).read_text()) == self.fingerprint
        except (OSError, ValueError):
            return None
        return Posterior.load(path, module=self.module) if same and result_state(path) == "complete" else None

    def save(self, index: int, method: str, posterior: Posterior) -> None:
        """Keep the ``index``-th fit, finished, on disk (atomically)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / FINGERPRINT_FILE).exists():
            write_json(self.folder / FINGERPRINT_FILE, self.fingerprint)
        posterior.save(self.path(index, method), overwrite=True)

    def saved(self) -> list[Path]:
        """The folders of the fits kept so far."""
        return sorted(path for path in self.folder.glob("[0-9][0-9]-*") if result_state(path) == "complete")

    def discard(self) -> None:
        """Remove this command's fits (their report is written), and ``<out>.partial-fits`` once it is empty."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.root.is_dir() and not any(self.root.iterdir()):
            self.root.rmdir()
