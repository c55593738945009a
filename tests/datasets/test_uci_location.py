"""Finding the UCI benchmark folder: ``BNN_UCI_DIR``, else the repository's ``../shared/data/uci``."""

from __future__ import annotations

from pathlib import Path

import pytest
from bnn.datasets import UCI_DIR_VARIABLE, find_uci_dir, load_uci, uci_location

REPOSITORY = Path(__file__).resolve().parents[2]


def uci_folder(root: Path) -> Path:
    """A folder holding one data set folder with a ``data.txt``."""
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "data.txt").write_text("1 2\n")
    return root


def test_the_variable_names_the_folder(tmp_path):
    assert find_uci_dir({UCI_DIR_VARIABLE: str(uci_folder(tmp_path / "uci"))}) == tmp_path / "uci"


def test_the_default_is_shared_data_uci_beside_the_repository():
    assert uci_location.default_uci_dir() == REPOSITORY.parent / "shared" / "data" / "uci"


@pytest.mark.parametrize("environ", [{}, {UCI_DIR_VARIABLE: ""}], ids=["unset", "empty"])
def test_without_the_variable_the_default_is_used(environ, monkeypatch, tmp_path):
    monkeypatch.setattr(uci_location, "default_uci_dir", lambda: uci_folder(tmp_path / "beside"))
    assert find_uci_dir(environ) == tmp_path / "beside"


def test_a_variable_that_is_not_a_folder_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=rf"{UCI_DIR_VARIABLE}=.*missing is not a folder; set {UCI_DIR_VARIABLE} to"):
        find_uci_dir({UCI_DIR_VARIABLE: str(tmp_path / "missing")})


def test_a_folder_without_data_sets_is_refused(tmp_path):
    (tmp_path / "empty-set").mkdir()
    with pytest.raises(ValueError, match=rf"holds no UCI data set folder \(a folder with a data.txt\); set {UCI_DIR_VARIABLE}"):
        find_uci_dir({UCI_DIR_VARIABLE: str(tmp_path)})


def test_a_missing_default_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setattr(uci_location, "default_uci_dir", lambda: tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"the default .*nowhere \(the repository's ../shared/data/uci\) is not a folder"):
        find_uci_dir({})


@pytest.mark.skipif(not uci_location.default_uci_dir().is_dir(), reason="needs ../shared/data/uci beside the repository")
def test_the_found_folder_loads_yacht(monkeypatch):
    monkeypatch.delenv(UCI_DIR_VARIABLE, raising=False)
    assert load_uci(find_uci_dir(), "yacht", 0).in_features == 6
