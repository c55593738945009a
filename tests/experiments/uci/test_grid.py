import warnings

import pytest

from bnn.experiments.uci.grid import DEFAULT_HIDDEN, find_datasets, hidden_units, parse_splits, splits_of
from tests.support.uci import write_uci_folder


@pytest.mark.parametrize("text, splits", [("0-19", list(range(20))), ("0,3,5", [0, 3, 5]), ("4-6,1,5", [1, 4, 5, 6]),
                                          ("7", [7]), ("0-9999", list(range(10_000)))])
def test_parse_splits(text, splits):
    assert parse_splits(text) == splits


@pytest.mark.parametrize("text, message", [("a", "numbers and ranges"), ("1-", "numbers and ranges"),
                                           ("-1", "numbers and ranges"), ("5-2", "ends before it starts"),
                                           ("0-999999999999", "names more than 10,000 splits"),
                                           ("0-9999,20000", "names more than 10,000 splits")])
def test_parse_splits_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        parse_splits(text)


def test_find_datasets(tmp_path):
    root = write_uci_folder(write_uci_folder(tmp_path, "b"), "a")
    (root / "notes").mkdir()  # no data.txt: not a data set
    assert find_datasets(root, "all") == ["a", "b"]
    assert find_datasets(root, "b, a,b") == ["b", "a"]
    with pytest.raises(ValueError, match=r"no data set folder \['c'\] .* found \['a', 'b'\]"):
        find_datasets(root, "a,c")
    with pytest.raises(ValueError, match="is not a folder"):
        find_datasets(root / "missing", "all")
    with pytest.raises(ValueError, match="holds no data set folder"):
        find_datasets(root / "notes", "all")


def test_hidden_units(tmp_path):
    root = write_uci_folder(tmp_path, "a")
    assert hidden_units(root / "a") == 10
    (root / "a" / "n_hidden.txt").unlink()
    assert hidden_units(root / "a") == DEFAULT_HIDDEN
    for text in ("ten\n", "\u00b2\n", "0\n"):  # "²" is a digit to str.isdigit, not to int()
        (root / "a" / "n_hidden.txt").write_text(text)
        with pytest.raises(ValueError, match=f"{root / 'a' / 'n_hidden.txt'} must hold one positive whole number"):
            hidden_units(root / "a")


def test_splits_of_keeps_those_the_data_set_has_and_says_so(tmp_path):
    root = write_uci_folder(tmp_path, "a", splits=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert splits_of(root, "a", [0, 1]) == [0, 1]
    with pytest.warns(UserWarning, match="has splits 0-1 only: it runs 1 of the 3 splits"):
        assert splits_of(root, "a", [1, 2, 3]) == [1]
    with pytest.raises(ValueError, match=r"none of the splits \[5\] \(it has \[0, 1\]\)"):
        splits_of(root, "a", [5])
