"""The Ray executor: one Ray task per cell on a local or remote Ray cluster, results streamed back as they finish.

Each data set's table goes to the object store once (``ray.put``); each cell is a task that declares the cores it
uses (``num_cpus``: a NUTS cell one per chain, any other one). A task that raises or whose worker or node dies is
retried up to ``max_retries`` times by Ray, then comes back as a failed result, which the table reports and a rerun
runs again. The driver writes each result as it arrives (:func:`ray.wait`), so resuming works as with the local
executor; Ctrl-C cancels the tasks in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bnn.datasets.uci import UCITable
from bnn.experiments.uci.grid import Cell
from bnn.experiments.uci.protocol import failed_row, run_cell
from bnn.inference.fit import METHODS


def import_ray():
    """The ``ray`` module.

    Raises
    ------
    ImportError
        When Ray is not installed, naming the extra that installs it.
    """
    try:
        import ray
    except ImportError:
        raise ImportError("--executor ray needs Ray: pip install -e '.[ray]' (or pip install 'bnn-collection[ray]')") from None
    return ray


def cores_needed(cell: Cell) -> int:
    """The cores ``cell`` keeps busy, by its method's protocol (NUTS runs its chains in parallel processes, the other
    methods one)."""
    return METHODS.get(cell.method).uci.cores(cell.options)


def run_ray(tables: dict[str, UCITable], cells: list[Cell], workers: int, address: str | None = None,
            max_retries: int = 2,
            task: Callable[[UCITable, Cell], dict[str, Any]] = run_cell) -> Iterator[dict[str, Any]]:
    """Yield the result of every cell of ``cells`` as it finishes, one Ray task per cell (module notes).

    Parameters
    ----------
    tables : dict of str to UCITable
        The data set of each cell, by name.
    cells : list of Cell
        The cells to run.
    workers : int
        Cores of the Ray cluster started here when ``address`` is ``None`` and none is running in this process.
    address : str, optional
        A running cluster's address (``ray start --head`` prints it; ``"auto"`` finds one on this machine).
    max_retries : int
        Retries of a task that raises or whose worker dies, before its cell is reported failed.
    task : callable
        What runs one cell (:func:`~bnn.experiments.uci.protocol.run_cell`).
    """
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 configure_logging=False, log_to_driver=False)
    remote = ray.remote(task)
    pending: dict[Any, Cell] = {}
    try:
        stored = {name: ray.put(table) for name, table in tables.items()}
        for cell in cells:
            ref = remote.options(num_cpus=cores_needed(cell), max_retries=max_retries, retry_exceptions=True,
                                 name=cell.name).remote(stored[cell.dataset], cell)
            pending[ref] = cell
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ref)
            try:
                result = ray.get(ref)
            except ray.exceptions.RayError as error:
                cause = getattr(error, "cause", None) or error
                result = failed_row(cell, f"{type(cause).__name__}: {cause}".splitlines()[0], max_retries + 1)
            yield result
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
