"""What every method that runs work in processes, or on one thread, shares: cores, one torch thread, worker start.

A worker process leaves Ctrl-C and SIGTERM to its parent (which stops it and keeps what is done), computes on one
torch thread, and ends itself once its parent is gone (a parent killed with SIGKILL cannot shut its workers down).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

PARENT_POLL_SECONDS = 0.5


def available_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block on one torch thread, then restore the thread count (small tensors: a second thread only waits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _exit_with_parent(parent: int) -> None:
    """End this worker, whatever it is doing, once ``parent`` is gone: it ignores SIGINT and SIGTERM."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def start_worker(parent: int) -> None:
    """A worker process's start: ignore SIGINT and SIGTERM (the parent's to handle), compute on one torch thread, and
    end when the process ``parent`` is gone."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent,), name="exit with parent", daemon=True).start()
    torch.set_num_threads(1)
