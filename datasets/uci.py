"""Loader for the UCI regression benchmark layout (Hernández-Lobato & Adams 2015).

A data set folder holds ``data.txt`` (whitespace-separated rows), ``index_features.txt``,
``index_target.txt`` and the fixed splits ``index_train_K.txt`` / ``index_test_K.txt``
(0-based row indices). Use exactly these splits to compare with published tables.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from bnn.datasets.dataset import Dataset

SPLIT_FILE = re.compile(r"index_train_(\d+)\.txt")
"""The name of split K's training index file; other files that start alike are not splits."""


def _not_a_file(path: Path) -> str:
    """What ``path`` is when it is not a regular file: missing, a folder, a FIFO, ... (not read: a FIFO would block)."""
    if not path.exists():
        return "does not exist"
    mode = path.stat().st_mode
    kinds = [(stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    return "is " + next((kind for test, kind in kinds if test(mode)), "not a regular file") + ", not a file"


def _read_numbers(path: Path, what: str) -> np.ndarray:
    """The whitespace-separated numbers of ``path``, one row per non-blank line, checked to be a finite table."""
    if not path.is_file():
        raise ValueError(f"missing {what}: {path} {_not_a_file(path)}; is this a UCI data set folder?")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file (it holds bytes that are not UTF-8); a {what} holds "
                         "whitespace-separated numbers, one row per line") from None
    lines = [(number, line.split()) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty")
    first, width = lines[0][0], len(lines[0][1])
    ragged = next(((number, len(fields)) for number, fields in lines if len(fields) != width), None)
    if ragged is not None:
        raise ValueError(f"{path} has ragged rows: line {first} has {width} fields, line {ragged[0]} has {ragged[1]}")
    values = np.empty((len(lines), width))
    for i, (number, fields) in enumerate(lines):
        try:
            values[i] = [float(field) for field in fields]
        except ValueError as error:
            raise ValueError(f"{path} line {number} holds a non-numeric entry: {error}") from None
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        row, column = bad[0]
        raise ValueError(f"{path} line {lines[row][0]}, column {column} holds {lines[row][1][column]!r}; the table must "
                         "be finite: fix or drop that row (and renumber the index files)")
    return values


def _read_indices(path: Path, what: str, limit: int) -> np.ndarray:
    values = _read_numbers(path, what).ravel()
    fractional = values[values != np.round(values)]
    if fractional.size:
        raise ValueError(f"{path} must hold whole-number (0-based row) indices, got {float(fractional[0])!r}")
    indices = values.astype(np.int64)
    if indices.min() < 0 or indices.max() >= limit:
        raise ValueError(f"{path} has indices outside 0..{limit - 1}: min {indices.min()}, max {indices.max()}")
    if len(np.unique(indices)) != len(indices):
        raise ValueError(f"{path} repeats indices")
    return indices


@dataclass(frozen=True)
class UCITable:
    """One UCI data set folder read whole: the table, its input and target columns, and the chosen splits.

    Small enough to ship to a worker process or a cluster's object store once; :meth:`split` makes the
    :class:`~bnn.datasets.Dataset` of one split from it.

    Attributes
    ----------
    name : str
        The folder's name.
    data : numpy.ndarray
        The table of ``data.txt``, one row per example.
    features : numpy.ndarray
        0-based input columns.
    target : int
        0-based target column.
    splits : dict of int to (numpy.ndarray, numpy.ndarray)
        ``splits[k]``: the training and test rows of split ``k``.
    """

    name: str
    data: np.ndarray
    features: np.ndarray
    target: int
    splits: dict[int, tuple[np.ndarray, np.ndarray]]

    def arrays(self, split: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The raw ``x_train, y_train, x_test, y_test`` of split ``split``."""
        train, test = self.splits[split]
        x, y = self.data[:, self.features], self.data[:, self.target]
        return x[train], y[train], x[test], y[test]

    def split(self, split: int) -> Dataset:
        """The :class:`~bnn.datasets.Dataset` of split ``split``, standardised with its training rows."""
        return Dataset.from_arrays(self.name, "regression", *self.arrays(split))


def read_whole_number(path: Path, meaning: str) -> int:
    """The one positive whole number a setting file of a data set folder holds (``n_hidden.txt``, ``n_epochs.txt``).

    Raises
    ------
    ValueError
        For a file that holds anything else, naming it and ``meaning``.
    """
    text = path.read_text().strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:  # "²".isdigit() holds, and int("²") fails
        raise ValueError(f"{path} must hold one positive whole number ({meaning}), got {text!r}")
    return int(text)


def available_splits(folder: Path) -> list[int]:
    """The split numbers whose training index file ``folder`` holds."""
    return sorted(int(match[1]) for p in folder.glob("index_train_*.txt") if (match := SPLIT_FILE.fullmatch(p.name)))


def read_uci_table(directory: str | Path, name: str, splits: list[int]) -> UCITable:
    """Read UCI data set ``name`` from ``directory`` with the standard splits ``splits``, every file checked.

    Raises
    ------
    ValueError
        For a missing folder or file, a file that is not text, empty, ragged, non-numeric or
        non-finite (naming the file and line), indices out of range, negative, fractional or
        repeated, train and test splits that overlap, or a split number that does not exist.
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
    rows = {}
    for split in splits:
        train_file = folder / f"index_train_{split}.txt"
        if not train_file.is_file():
            raise ValueError(f"split {split} does not exist for {name}; available splits: {available_splits(folder)}")
        train = _read_indices(train_file, "train index file", len(data))
        test = _read_indices(folder / f"index_test_{split}.txt", "test index file", len(data))
        overlap = np.intersect1d(train, test)
        if overlap.size:
            raise ValueError(f"split {split} of {name} is invalid: {overlap.size} rows are in both train and test")
        rows[split] = (train, test)
    return UCITable(name, data, features, int(target[0]), rows)


def load_uci(directory: str | Path, name: str, split: int = 0) -> Dataset:
    """Load UCI data set ``name`` from ``directory`` with its standard split number ``split``.

    Raises
    ------
    ValueError
        As :func:`read_uci_table`.
    """
    return read_uci_table(directory, name, [split]).split(split)
