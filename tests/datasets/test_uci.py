from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from bnn.datasets import load_uci

from tests.support.uci import UCI


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
        (dict(data="1 2 3\n4 5\n1 2 3\n1 2 3\n"), r"data.txt has ragged rows: line 1 has 3 fields, line 2 has 2"),
        (dict(data="\n1 2 3\n\n1 2 3\n1 2\n1 2 3\n"), r"data.txt has ragged rows: line 2 has 3 fields, line 5 has 2"),
        (dict(data=GOOD, train="0\n1\n9\n"), r"index_train_0.txt has indices outside 0..3: min 0, max 9"),
        (dict(data=GOOD, test="-1\n"), r"index_test_0.txt has indices outside 0..3: min -1"),
        (dict(data=GOOD, train="0\n1.5\n2\n"), r"index_train_0.txt must hold whole-number \(0-based row\) indices, got 1.5"),
        (dict(data=GOOD, train="0\n1\n1\n"), r"index_train_0.txt repeats indices"),
        (dict(data=GOOD, features="0\n3\n"), r"index_features.txt has indices outside 0..2: min 0, max 3"),
        (dict(data=GOOD, target="5\n"), r"index_target.txt has indices outside 0..2"),
        (dict(data=GOOD, target="1\n"), "one target column that is not a feature"),
        (dict(data=GOOD, test="2\n3\n"), "1 rows are in both train and test"),
        (dict(data="1 2 x\n" * 4), r"data.txt line 1 holds a non-numeric entry"),
        (dict(data=""), r"data.txt is empty"),
        (dict(data="\n  \n"), r"data.txt is empty"),
        (dict(data=GOOD, test=""), r"index_test_0.txt is empty"),
        (dict(data=GOOD.replace("3 5 0.3", "3 nan 0.3")), r"data.txt line 3, column 1 holds 'nan'; the table must be finite"),
        (dict(data=GOOD.replace("0.4", "-inf")), r"data.txt line 4, column 2 holds '-inf'"),
        (dict(data=GOOD.replace("0.2", "1e999")), r"data.txt line 2, column 2 holds '1e999'"),
        (dict(data=GOOD, train="0\nnan\n2\n"), r"index_train_0.txt line 2, column 0 holds 'nan'"),
    ],
    ids=["ragged", "ragged after blank lines", "train index too large", "negative test index", "fractional index",
         "repeated index", "feature index out of range", "target index out of range", "target is a feature", "overlap",
         "non-numeric", "empty", "blank lines only", "empty index file", "nan", "-inf", "overflow", "nan index"],
)
def test_damaged_folders_give_clear_errors(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_uci(write_uci(tmp_path, **kwargs), "fake", 0)


def test_a_binary_data_file_is_named(tmp_path):
    folder = write_uci(tmp_path, GOOD)
    (folder / "fake" / "data.txt").write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match=r"data.txt is not a text file \(it holds bytes that are not UTF-8\)"):
        load_uci(folder, "fake", 0)


@pytest.mark.parametrize("missing, message", [("data.txt", "missing data file"),
                                              ("index_test_0.txt", "missing test index file"),
                                              ("index_features.txt", "missing feature index file"),
                                              ("index_target.txt", "missing target index file")])
def test_a_missing_file_is_named(tmp_path, missing, message):
    folder = write_uci(tmp_path, GOOD)
    (folder / "fake" / missing).unlink()
    with pytest.raises(ValueError, match=f"{message}: .*{missing} does not exist"):
        load_uci(folder, "fake", 0)


def test_stray_files_beside_the_splits_are_not_taken_for_splits(tmp_path):
    folder = write_uci(tmp_path, GOOD)
    (folder / "fake" / "index_train_foo.txt").write_text("0\n")
    (folder / "fake" / "index_train_12.txt").write_text("0\n")
    with pytest.raises(ValueError, match=r"split 3 does not exist for fake; available splits: \[0, 12\]"):
        load_uci(folder, "fake", 3)


def test_missing_files_and_splits(tmp_path):
    folder = write_uci(tmp_path, GOOD)
    with pytest.raises(ValueError, match=r"split 3 does not exist for fake; available splits: \[0\]"):
        load_uci(folder, "fake", 3)
    with pytest.raises(ValueError, match=r"no UCI data set 'boston' in .*; found \['fake'\]"):
        load_uci(folder, "boston", 0)


@pytest.mark.parametrize("make, what", [
    (lambda path: path.mkdir(), "is a folder, not a file"),
    (lambda path: os.mkfifo(path), r"is a FIFO \(named pipe\), not a file"),  # never opened: reading would block
])
def test_a_data_file_that_is_not_a_file_says_what_it_is(tmp_path, make, what):
    folder = write_uci(tmp_path, GOOD)
    (folder / "fake" / "data.txt").unlink()
    make(folder / "fake" / "data.txt")
    with pytest.raises(ValueError, match=f"missing data file: .*data.txt {what}; is this a UCI data set folder"):
        load_uci(folder, "fake", 0)
