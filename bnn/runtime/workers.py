"""What every method that runs work in processes, or on one thread, shares: cores, one torch thread, worker settings.

A worker process starts with :func:`bnn.runtime.worker_process.start_worker` (it leaves Ctrl-C and SIGTERM to its parent,
which stops it and keeps what is done, and ends itself once its parent is gone) and computes on one torch thread
(:data:`WORKER_ENV`, read before it imports torch).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

WORKER_ENV = {"OMP_NUM_THREADS": "1"}
"""The environment a worker process starts with: one torch thread (small tensors: a second thread only waits)."""


def available_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """Cores the fit's processes can count on: those this process may use, less the load other work puts on them
    (the one-minute load average, this process's own share left out), at least one."""
    cores = available_cores()
    return max(1, min(cores, math.floor(cores - os.getloadavg()[0] + 1)))


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch thread, then restore the thread count (small tensors: a second thread only waits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
