"""Loader for the UCI regression benchmark layout (Hernández-Lobato & Adams 2015).

A data set folder holds ``data.txt`` (whitespace-separated rows), ``index_features.txt``,
``index_target.txt`` and the fixed splits ``index_train_K.txt`` / ``index_test_K.txt``
(0-based row indices). Use exactly these splits to compare with published tables.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bnn_data.dataset import Dataset


def _read_numbers(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise ValueError(f"missing {what}: {path} does not exist; is this a UCI data set folder?")
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{path} is empty")
    lengths = {len(row) for row in rows}
    if len(lengths) > 1:
        bad = next(i for i, row in enumerate(rows) if len(row) != len(rows[0]))
        raise ValueError(f"{path} has ragged rows: row 0 has {len(rows[0])} fields, row {bad} has {len(rows[bad])}")
    try:
        return np.array(rows, dtype=np.float64)
    except ValueError as error:
        raise ValueError(f"{path} holds a non-numeric entry: {error}") from None


def _read_indices(path: Path, what: str, limit: int) -> np.ndarray:
    values = _read_numbers(path, what).ravel()
    if not np.all(values == np.round(values)):
        raise ValueError(f"{path} must hold whole-number indices")
    indices = values.astype(np.int64)
    if indices.min() < 0 or indices.max() >= limit:
        raise ValueError(f"{path} has indices outside 0..{limit - 1}: min {indices.min()}, max {indices.max()}")
    if len(np.unique(indices)) != len(indices):
        raise ValueError(f"{path} repeats indices")
    return indices


def load_uci(directory: str | Path, name: str, split: int = 0) -> Dataset:
    """Load UCI data set ``name`` from ``directory`` with its standard split number ``split``.

    Raises
    ------
    ValueError
        For a missing folder or file, ragged or non-numeric rows, indices out of range,
        train and test splits that overlap, or a split number that does not exist.
    """
    folder = Path(directory) / name
    if not folder.is_dir():
        available = sorted(p.name for p in Path(directory).iterdir() if p.is_dir()) if Path(directory).is_dir() else []
        raise ValueError(f"no UCI data set {name!r} in {directory}; found {available}")
    data = _read_numbers(folder / "data.txt", "data file")
    columns = data.shape[1]
    features = _read_indices(folder / "index_features.txt", "feature index file", columns)
    target = _read_indices(folder / "index_target.txt", "target index file", columns)
    if len(target) != 1 or target[0] in features:
        raise ValueError(f"{folder} must name one target column that is not a feature")
    train_file = folder / f"index_train_{split}.txt"
    if not train_file.is_file():
        splits = sorted(int(p.stem.rsplit("_", 1)[1]) for p in folder.glob("index_train_*.txt"))
        raise ValueError(f"split {split} does not exist for {name}; available splits: {splits}")
    train = _read_indices(train_file, "train index file", len(data))
    test = _read_indices(folder / f"index_test_{split}.txt", "test index file", len(data))
    overlap = np.intersect1d(train, test)
    if overlap.size:
        raise ValueError(f"split {split} of {name} is invalid: {overlap.size} rows are in both train and test")
    x, y = data[:, features], data[:, target[0]]
    return Dataset.from_arrays(name, "regression", x[train], y[train], x[test], y[test])
