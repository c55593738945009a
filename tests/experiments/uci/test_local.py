"""The local executor: rows as the cells finish; Ctrl-C while it waits keeps the rows finished and ends the workers."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from bnn.experiments.uci import local
from bnn.experiments.uci.grid import Cell
from tests.support.growing_worker import RECYCLE_AT_20_MB, grow

pytestmark = pytest.mark.subprocess


def quick_or_stuck(table, cell: Cell) -> dict:
    """Split 0 finishes at once, split 1 never does."""
    while cell.split == 1:
        time.sleep(1)
    return {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "status": "ok"}


def test_ctrl_c_while_waiting_is_acted_on_after_the_wait_keeps_the_rows_finished_and_ends_the_workers(monkeypatch):
    signalled, wait = [], local.first_finished

    def ctrl_c_once_a_row_came(pending):  # Ctrl-C at the start of the first wait after a row came
        if rows and not signalled:
            signalled.append("sent")
            signal.raise_signal(signal.SIGINT)
            finished = wait(pending)
            signalled.append("the wait ended")  # not cut short inside concurrent.futures
            return finished
        return wait(pending)

    monkeypatch.setattr(local, "first_finished", ctrl_c_once_a_row_came)
    cells = [Cell("toy", "svi", split, 3, {}) for split in (0, 1)]
    rows = []
    with pytest.raises(KeyboardInterrupt):
        for row in local.run_local({"toy": None}, cells, 2, task=quick_or_stuck):
            rows.append(row)
    assert signalled == ["sent", "the wait ended"] and [row["split"] for row in rows] == [0]
    workers = [child for child in psutil.Process().children() if "resource_tracker" not in _command_line(child)]
    assert psutil.wait_procs(workers, timeout=10)[1] == []


def _command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # gone meanwhile
        return ""


def grow_by_50_mb(table, cell: Cell) -> dict:
    """Keep 50 MB more than the cell before, over more than loky's second between two memory checks, and say which
    worker ran it."""
    grow(50)
    return {"dataset": cell.dataset, "method": cell.method, "split": cell.split, "status": "ok", "worker": os.getpid()}


@pytest.mark.slow  # make test: the same restart of a grown worker in tests/inference/map_search/test_map_starts.py
def test_a_worker_restarted_for_its_memory_is_not_reported_as_a_leak(monkeypatch, recwarn):
    for name, value in RECYCLE_AT_20_MB.items():  # the workers read it when they start
        monkeypatch.setenv(name, value)
    cells = [Cell("toy", "svi", split, 3, {}) for split in range(3)]
    rows = list(local.run_local({"toy": None}, cells, 1, task=grow_by_50_mb))
    assert len({row["worker"] for row in rows}) > 1  # loky restarted the one worker between cells
    assert [str(warning.message) for warning in recwarn if "worker" in str(warning.message)] == []
