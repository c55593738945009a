"""Every notebook runs top to bottom in the fast setting (BNN_NOTEBOOK_FAST=1), in a scratch folder."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.notebooks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_with_the_outputs_of_a_run(path):
    """Every code cell was executed, in order, and shows what it produced (text, a table or a plot), none an error."""
    code = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), "run it top to bottom in a fresh kernel"
    empty = [index for index, cell in enumerate(code) if not cell.outputs]
    assert not empty, f"code cells {empty} have no outputs: commit the notebook executed in full"
    assert not [o for cell in code for o in cell.outputs if o.output_type == "error"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    monkeypatch.setenv("BNN_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    NotebookClient(notebook, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert os.listdir(tmp_path)  # the notebook wrote its results into the scratch folder
