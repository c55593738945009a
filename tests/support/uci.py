"""The UCI data of ../shared, and synthetic data set folders in the UCI benchmark's standard layout, for the runner's
tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

UCI = Path(__file__).resolve().parents[3] / "shared" / "data" / "uci"
"""The UCI benchmark's data sets, in ../shared beside the checkout."""

FAST_SVI = {"svi": {"steps": 30, "num_samples": 20}}
"""A cheap method for grids whose numbers do not matter, only that they come back the same."""


def write_uci_folder(root: Path, name: str, rows: int = 120, splits: int = 2, constant_column: bool = False,
                     seed: int = 0) -> Path:
    """A data set folder ``root/name``: ``y = sin(x0) + x1 / 2 + noise``, three inputs (the last constant when
    ``constant_column``), ``splits`` random 90/10 splits; return ``root``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 3))
    if constant_column:
        x[:, 2] = 4.0
    y = np.sin(x[:, 0]) + x[:, 1] / 2 + 0.1 * rng.normal(size=rows)
    folder = root / name
    folder.mkdir(parents=True)
    np.savetxt(folder / "data.txt", np.column_stack([x, y]))
    (folder / "index_features.txt").write_text("0\n1\n2\n")
    (folder / "index_target.txt").write_text("3\n")
    (folder / "n_hidden.txt").write_text("10\n")
    for split in range(splits):
        order = rng.permutation(rows)
        test = rows // 10
        np.savetxt(folder / f"index_train_{split}.txt", order[test:], fmt="%d")
        np.savetxt(folder / f"index_test_{split}.txt", order[:test], fmt="%d")
    return root
