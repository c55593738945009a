from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bnn_data import load_uci

UCI = Path(__file__).resolve().parents[3] / "shared" / "data" / "uci"


def write_uci(folder: Path, data: str, train="0\n1\n2\n", test="3\n", features="0\n1\n", target="2\n") -> Path:
    root = folder / "fake"
    root.mkdir(parents=True)
    (root / "data.txt").write_text(data)
    (root / "index_features.txt").write_text(features)
    (root / "index_target.txt").write_text(target)
    (root / "index_train_0.txt").write_text(train)
    (root / "index_test_0.txt").write_text(test)
    return folder


GOOD = "1 5 0.1\n2 5 0.2\n3 5 0.3\n4 5 0.4\n"


@pytest.mark.skipif(not UCI.is_dir(), reason="needs ../shared/data/uci beside the repository")
def test_yacht_split_zero_has_the_published_sizes():
    data = load_uci(UCI, "yacht", 0)
    assert data.in_features == 6
    assert data.x_train.shape[0] + data.x_test.shape[0] == 308
    indices = np.loadtxt(UCI / "yacht" / "index_test_0.txt", dtype=int)
    assert data.x_test.shape[0] == len(indices)


def test_constant_column_is_handled(tmp_path):
    data = load_uci(write_uci(tmp_path, GOOD), "fake", 0)
    assert np.isfinite(data.x_train.numpy()).all() and (data.x_train[:, 1] == 0).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(data="1 2 3\n4 5\n1 2 3\n1 2 3\n"), "ragged rows: row 0 has 3 fields, row 1 has 2"),
        (dict(data=GOOD, train="0\n1\n9\n"), "indices outside 0..3"),
        (dict(data=GOOD, test="2\n3\n"), "1 rows are in both train and test"),
        (dict(data="1 2 x\n" * 4), "non-numeric entry"),
        (dict(data=GOOD, target="1\n"), "one target column that is not a feature"),
    ],
)
def test_damaged_folders_give_clear_errors(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_uci(write_uci(tmp_path, **kwargs), "fake", 0)


def test_missing_files_and_splits(tmp_path):
    folder = write_uci(tmp_path, GOOD)
    with pytest.raises(ValueError, match=r"split 3 does not exist for fake; available splits: \[0\]"):
        load_uci(folder, "fake", 3)
    with pytest.raises(ValueError, match=r"no UCI data set 'boston' in .*; found \['fake'\]"):
        load_uci(folder, "boston", 0)
    (folder / "fake" / "index_target.txt").unlink()
    with pytest.raises(ValueError, match="missing target index file"):
        load_uci(folder, "fake", 0)
