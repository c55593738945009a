"""Every notebook runs top to bottom in the fast setting (BNN_NOTEBOOK_FAST=1), in a scratch folder.

The notebooks a test process runs share one kernel, so that its start and the imports every notebook makes (torch,
Pyro, ArviZ, matplotlib: about 4 s of each notebook's time) are paid once. Each notebook starts from the state of a
fresh kernel as far as a notebook changes it (:data:`FRESH_STATE`): an empty namespace, its own working folder, the
start's default dtype, torch threads, torch seed, warning filters, ``sys.path`` and matplotlib settings, no figure
open. A module a notebook imports stays imported, which is what saves the time; each notebook still imports what it
uses, since its names are gone.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from jupyter_client import KernelManager
from nbclient import NotebookClient

pytestmark = pytest.mark.notebooks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))

KERNEL_START = """
import sys, warnings
import torch
get_ipython().fresh_state = (list(sys.path), list(warnings.filters), torch.get_default_dtype(), torch.get_num_threads(),
                             torch.initial_seed())
"""
"""Run once in the shared kernel as it starts: what a notebook may change, as a fresh kernel has it."""

FRESH_STATE = """
import os, sys, warnings
import matplotlib, matplotlib.pyplot
import torch
os.chdir({folder!r})
sys.path[:], warnings.filters[:], dtype, threads, seed = get_ipython().fresh_state
torch.set_default_dtype(dtype)
torch.set_num_threads(threads)
torch.manual_seed(seed)
matplotlib.pyplot.close("all")
matplotlib.rcdefaults()
%reset -f
"""
"""Run before each notebook, in its scratch folder ``folder``: the kernel as :data:`KERNEL_START` found it."""


@pytest.fixture(scope="module")
def kernel():
    """The kernel this test process runs its notebooks in, started with the fast setting, the Agg backend and one
    OpenMP thread (beside the other test worker, as each worker computes: tests/conftest.py)."""
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env={**os.environ, "BNN_NOTEBOOK_FAST": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"})
    try:
        run_cells(manager, [KERNEL_START])
        yield manager
    finally:
        manager.shutdown_kernel(now=True)


def run_cells(manager: KernelManager, sources: list[str], notebook=None) -> nbformat.NotebookNode:
    """Run ``sources`` and then ``notebook``'s cells in the kernel of ``manager``; the notebook run, its outputs in."""
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    run = nbformat.v4.new_notebook(cells=cells + (notebook.cells if notebook else []), metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    client = NotebookClient(run, km=manager, timeout=600)
    try:
        client.execute()
    finally:
        if client.kc is not None:  # the kernel goes on for the next notebook; this client's channels end here
            client.kc.stop_channels()
    return run


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
def test_notebook_runs(path, tmp_path, kernel):
    notebook = nbformat.read(path, as_version=4)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    run = run_cells(kernel, [FRESH_STATE.format(folder=str(tmp_path))], notebook)
    errors = [o for cell in run.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert os.listdir(tmp_path)  # the notebook wrote its results into the scratch folder


def test_each_notebook_starts_from_a_fresh_kernels_state(tmp_path, kernel):
    """What one notebook changes (its names, dtype, threads, seed, filters, path, working folder) the next does not see."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    changes = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, warnings, torch\nleft_behind = 1\ntorch.set_default_dtype(torch.float64)\n"
        "torch.set_num_threads(torch.get_num_threads() + 1)\nwarnings.simplefilter('error')\n"
        "sys.path.insert(0, 'elsewhere')\ntorch.manual_seed(123)")])
    run_cells(kernel, [FRESH_STATE.format(folder=str(first))], changes)
    check = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os, sys, warnings, torch\n_, filters, dtype, threads, seed = get_ipython().fresh_state\n"
        "print('left_behind' in globals(), torch.get_default_dtype(), torch.get_num_threads() == threads,\n"
        "      warnings.filters == filters, 'elsewhere' in sys.path, os.getcwd(),\n"
        "      torch.initial_seed() == seed)")])
    run = run_cells(kernel, [FRESH_STATE.format(folder=str(second))], check)
    printed = run.cells[-1].outputs[0]["text"].split()
    assert printed == ["False", "torch.float32", "True", "True", "False", str(second), "True"]
