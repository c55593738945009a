"""The grid of a UCI run: which data sets, which splits, which methods; one cell per (data set, method, split)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bnn.datasets.uci import available_splits, read_whole_number
from bnn.runtime.stacklevel import user_stacklevel

SPLITS_TEXT = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
DEFAULT_HIDDEN = 50
"""Hidden units when a folder has no ``n_hidden.txt`` (the papers' width for every set but protein and year)."""


@dataclass(frozen=True)
class Cell:
    """One fit of the grid: ``method`` on split ``split`` of data set ``dataset``.

    Attributes
    ----------
    dataset, method : str
        Names.
    split : int
        The standard split's number.
    hidden : int
        Units of the one hidden layer (the folder's ``n_hidden.txt``).
    options : dict
        The fit options of the method, seed included.
    validation : dict of str to list of float
        Options chosen on a validation part of the training split, each with its candidates (empty: none).
    set_by_user : dict
        The options of ``options`` the user set (``--set``), which the result's ``selection`` names.
    conformal : float, optional
        The share of the training split that calibrates the conformal intervals of a second fit on the rest
        (:func:`~bnn.experiments.uci.protocol.conformal_measures`); ``None``: not measured.
    """

    dataset: str
    method: str
    split: int
    hidden: int
    options: dict[str, Any] = field(compare=False, hash=False)
    validation: dict[str, list[float]] = field(default_factory=dict, compare=False, hash=False)
    set_by_user: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    conformal: float | None = field(default=None, compare=False, hash=False)

    @property
    def name(self) -> str:
        """``dataset/method/split-K``, the cell's place in the run folder and in messages."""
        return f"{self.dataset}/{self.method}/split-{self.split}"


MAX_SPLITS = 10_000
"""The most split numbers ``--splits`` may name (the benchmark's folders hold 20 at most): a range beyond is a typo,
refused before it is built in memory."""


def parse_splits(text: str) -> list[int]:
    """The split numbers of ``"0-19"``, ``"0,3,5"`` or ``"0-2,7"`` (sorted, each once).

    Raises
    ------
    ValueError
        For any other text, a range whose end comes before its start, or more than :data:`MAX_SPLITS` numbers.
    """
    text = text.replace(" ", "")
    if not SPLITS_TEXT.fullmatch(text):
        raise ValueError(f"--splits takes numbers and ranges such as 0-19 or 0,3,5, got {text!r}")
    ranges = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if last and int(last) < int(first):
            raise ValueError(f"--splits range {part!r} ends before it starts; write it as {last}-{first}")
        ranges.append(range(int(first), int(last or first) + 1))
    if sum(len(numbers) for numbers in ranges) > MAX_SPLITS:
        raise ValueError(f"--splits {text} names more than {MAX_SPLITS:,} splits; a data set folder holds one "
                         "index_train_K.txt per split (20 in the benchmark): name the splits it has, such as 0-19")
    return sorted(set().union(*ranges))


def find_datasets(uci_dir: Path, text: str) -> list[str]:
    """The data set folders ``text`` names (comma-separated), or every folder of ``uci_dir`` holding a ``data.txt``
    for ``"all"``.

    Raises
    ------
    ValueError
        For a ``uci_dir`` that is not a folder, ``"all"`` in a folder without data sets, or a name with no folder.
    """
    if not uci_dir.is_dir():
        raise ValueError(f"--uci-dir {uci_dir} is not a folder; give the folder that holds one folder per data set")
    found = sorted(p.name for p in uci_dir.iterdir() if (p / "data.txt").is_file())
    if text.strip() == "all":
        if not found:
            raise ValueError(f"--datasets all: {uci_dir} holds no data set folder (a folder with a data.txt)")
        return found
    names = [name.strip() for name in text.split(",") if name.strip()]
    missing = [name for name in names if name not in found]
    if not names or missing:
        raise ValueError(f"--datasets {text!r}: no data set folder {missing or text!r} in {uci_dir}; found {found}")
    return list(dict.fromkeys(names))


def hidden_units(folder: Path) -> int:
    """The hidden width the papers used for this data set: ``n_hidden.txt``, else :data:`DEFAULT_HIDDEN`.

    Raises
    ------
    ValueError
        For an ``n_hidden.txt`` that does not hold one positive whole number.
    """
    path = folder / "n_hidden.txt"
    return read_whole_number(path, "the hidden units") if path.is_file() else DEFAULT_HIDDEN


def splits_of(uci_dir: Path, dataset: str, splits: list[int]) -> list[int]:
    """The splits of ``splits`` that ``dataset`` has (protein has 5, the others 20); warns about those it lacks.

    Raises
    ------
    ValueError
        When it has none of them, naming those it has.
    """
    have = available_splits(uci_dir / dataset)
    kept = [split for split in splits if split in have]
    if not kept:
        raise ValueError(f"data set {dataset} has none of the splits {splits} (it has {have}); choose --splits within them")
    if len(kept) < len(splits):
        warnings.warn(f"data set {dataset} has splits {have[0]}-{have[-1]} only: it runs {len(kept)} of the "
                      f"{len(splits)} splits asked for", UserWarning, stacklevel=user_stacklevel())
    return kept
