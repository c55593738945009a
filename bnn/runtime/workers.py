"""What every method that runs work in processes, or on one thread, shares: cores, one torch thread, worker settings.

Every fit computes on one torch thread unless the user chose a thread count (:func:`fit_threads`): the networks of
this collection are small, where a second intra-op thread gains little alone and costs much when another process
wants the core (two fits at once, a fit beside a notebook or the test suite; ``benchmarks/results/threads.md``).
A worker process starts with :func:`bnn.runtime.worker_process.start_worker` (it leaves Ctrl-C and SIGTERM to its parent,
which stops it and keeps what is done, and ends itself once its parent is gone) and computes on one torch thread
(:data:`WORKER_ENV`, read before it imports torch).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import torch

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""The environment variables by which a user sets torch's thread count before it starts."""
STARTING_THREADS = torch.get_num_threads()
"""torch's thread count when this module was imported: a different count later is one the user set."""
WORKER_ENV = {"OMP_NUM_THREADS": "1"}
"""The environment a worker process starts with: one torch thread (small tensors: a second thread only waits)."""


LOAD_WINDOW = 0.2
"""Seconds over which :func:`other_work` measures the machine's CPU use."""
LOAD_MEMORY = 5.0
"""Seconds a measurement of :func:`other_work` is reused (a budget's plan counts the same fits several times)."""
_measured: list[float] = []


def available_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def other_work() -> float:
    """The cores that other work kept busy over the last :data:`LOAD_WINDOW` seconds, measured now on the cores this
    process may use (psutil's CPU use of each, less this process's own), remembered for :data:`LOAD_MEMORY` seconds."""
    now = time.monotonic()
    if _measured and now - _measured[0] < LOAD_MEMORY:
        return _measured[1]
    own = psutil.Process()
    before = sum(own.cpu_times()[:2])
    per_core = psutil.cpu_percent(interval=LOAD_WINDOW, percpu=True)
    own_cores = (sum(own.cpu_times()[:2]) - before) / LOAD_WINDOW
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(len(per_core))
    busy = sum(per_core[core] for core in cores if core < len(per_core)) / 100
    _measured[:] = [now, max(0.0, busy - own_cores)]
    return _measured[1]


def free_cores() -> int:
    """Cores the fit's processes can count on: those this process may use, less those other work keeps busy now
    (:func:`other_work`, rounded), at least one. Measured over a short window rather than read from the load average:
    the one-minute average still counts work that has ended, such as this program's previous fit."""
    cores = available_cores()
    return max(1, min(cores, math.floor(cores - other_work() + 0.5)))


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch thread, then restore the thread count (small tensors: a second thread only waits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def user_chose_threads() -> bool:
    """Whether the user set torch's thread count: by :data:`THREAD_VARIABLES`, or by ``torch.set_num_threads``
    after importing ``bnn`` (a count set before the import cannot be told from torch's default)."""
    return any(os.environ.get(name) for name in THREAD_VARIABLES) or torch.get_num_threads() != STARTING_THREADS


@contextmanager
def fit_threads() -> Iterator[None]:
    """Run a fit on one torch thread (:func:`one_torch_thread`), unless the user chose a thread count
    (:func:`user_chose_threads`), which it keeps."""
    if user_chose_threads():
        yield
    else:
        with one_torch_thread():
            yield
