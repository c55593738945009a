"""The first steps of a worker process, and what the process that starts it does for them: stop signals, parent death.

Standard library and tqdm only, on purpose: a worker runs :func:`start_worker` before it imports torch (seconds),
so that from then on

- Ctrl-C (SIGINT, which the terminal sends to every process of the foreground group) and SIGTERM are the
  parent's to handle: the worker ignores them, and no ``KeyboardInterrupt`` traceback comes out of a worker that
  was still importing. Before its first line the worker cannot ignore them yet, so the parent starts its workers
  inside :func:`stop_signals_held`: a process begins life with its parent thread's blocked signals, and a signal
  blocked until it is ignored is discarded;
- the worker ends itself once its parent is gone (a parent killed with SIGKILL cannot shut its workers down);
- the worker's tqdm bars (a MAP start's, even disabled) lock with a thread lock, not tqdm's default
  cross-process semaphore: a worker killed at the end of the session cannot release a semaphore, and the
  resource tracker would report it as leaked.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bnn.runtime.stop_signals import STOP_SIGNALS

PARENT_POLL_SECONDS = 0.2

_shared: tuple[Any, ...] = ()


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Within the block this thread holds SIGINT and SIGTERM back, and the processes it starts begin with them held.

    This process loses nothing: a signal sent to it meanwhile reaches another of its threads (Python runs the
    handler in the main thread), or this one when the block ends.
    """
    _start_resource_tracker()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _start_resource_tracker() -> None:
    """Start the standard library's multiprocessing resource tracker now, if it is not running.

    Its first start unblocks SIGINT and SIGTERM in the calling thread (Python 3.11's
    ``multiprocessing.resource_tracker.ensure_running`` blocks them while it spawns the tracker, then unblocks them
    rather than restoring the mask). A pool starts it with its first worker; inside :func:`stop_signals_held` that
    would release the signals, and the next workers would begin with Ctrl-C live while they import.
    """
    if os.name == "posix":
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()


def _exit_with_parent(parent: int) -> None:
    """End this worker, whatever it is doing, once ``parent`` is gone (it has ignored SIGINT and SIGTERM)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(1)


def start_worker(parent: int, *shared: Any) -> None:
    """A worker's start (a process pool's initializer): ignore SIGINT and SIGTERM, then release them if they were
    held (:func:`stop_signals_held`; one that arrived meanwhile is dropped); end when the process ``parent`` is gone;
    keep ``shared`` (queues, events) for :func:`worker_shared`; give tqdm a thread lock."""
    global _shared
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    threading.Thread(target=_exit_with_parent, args=(parent,), name="exit with parent", daemon=True).start()
    _shared = shared


def worker_shared() -> tuple[Any, ...]:
    """The objects this worker's :func:`start_worker` was given after the parent's id."""
    return _shared
