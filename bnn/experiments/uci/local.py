"""The local executor: the cells of a UCI run in worker processes on this machine (loky), results as they finish.

Each worker starts with :func:`bnn.runtime.worker_process.start_worker` (Ctrl-C and SIGTERM are the parent's; it ends once
the parent is gone) on one torch thread. A cell that raises, or whose worker dies, comes back as a failed result
(the rerun runs it again); Ctrl-C or SIGTERM ends the workers and loses only the cells in flight. While this process
waits for the workers, the signals are recorded (:func:`~bnn.runtime.stop_signals.deferred_stop_signals`) and acted
on after each wait (:func:`~bnn.runtime.stop_signals.first_finished`), never raised inside it. loky restarts a
worker that has grown by 300 MB, silently here
(:func:`~bnn.runtime.recycled_workers.recycled_worker_notice_ignored`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from loky import ProcessPoolExecutor

from bnn.datasets.uci import UCITable
from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import failed_row, run_cell
from bnn.runtime.recycled_workers import recycled_worker_notice_ignored
from bnn.runtime.stop_signals import deferred_stop_signals, first_finished
from bnn.runtime.worker_process import start_worker, stop_signals_held
from bnn.runtime.workers import WORKER_ENV


def run_local(tables: dict[str, UCITable], cells: list[Cell], workers: int,
              task: Callable[[UCITable, Cell], dict[str, Any]] = run_cell) -> Iterator[dict[str, Any]]:
    """Yield the result of every cell of ``cells`` as it finishes, ``workers`` at a time in processes.

    Parameters
    ----------
    tables : dict of str to UCITable
        The data set of each cell, by name.
    cells : list of Cell
        The cells to run.
    workers : int
        Processes at once.
    task : callable
        What runs one cell (:func:`~bnn.experiments.uci.protocol.run_cell`).
    """
    with recycled_worker_notice_ignored():
        with stop_signals_held():  # the first queue starts loky's resource trackers
            pool = ProcessPoolExecutor(max_workers=workers, env=WORKER_ENV, initializer=start_worker,
                                       initargs=(os.getpid(),))
        try:
            with stop_signals_held():  # the first submit starts the workers
                futures = {pool.submit(task, tables[cell.dataset], cell): cell for cell in cells}
            pending = set(futures)
            while pending:
                rows, pending, stop = _rows_finished(futures, pending)
                yield from rows
                if stop is not None:
                    raise stop
        except BaseException:  # Ctrl-C, SIGTERM, or the caller stopped: end the cells in flight
            pool.shutdown(wait=True, kill_workers=True)
            raise
        pool.shutdown(wait=True)


def _rows_finished(futures: dict[Future, Cell], pending: set[Future]) -> tuple[list[dict[str, Any]], set[Future],
                                                                          KeyboardInterrupt | None]:
    """The rows of the cells of ``pending`` that finish within one wait, the cells still running, and the
    ``KeyboardInterrupt`` of a Ctrl-C or SIGTERM that came meanwhile (the rows finished are kept all the same)."""
    with deferred_stop_signals() as stop:
        finished, pending = first_finished(pending)
        rows = [_row(futures[future], future) for future in finished]
        return rows, pending, None if stop.signal is None else stop.interrupt()


def _row(cell: Cell, future: Future) -> dict[str, Any]:
    error = future.exception()
    return failed_row(cell, f"{type(error).__name__}: {error}", 1) if error else future.result()
