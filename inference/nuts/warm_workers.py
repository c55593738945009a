"""The chain worker processes, kept warm between the NUTS fits of one session.

A worker process takes seconds to start: it imports torch, Pyro, nutpie and the collection before its first
gradient. A notebook, ``bnn compare`` or a test suite runs NUTS again and again, so the workers of a fit that ended
cleanly wait for the next fit of this process for :data:`IDLE_SECONDS`, then end themselves (loky's idle timeout);
the next fit after that starts fresh ones. Every fit sends its model and data afresh, and every chain seeds its own
generators, so a warm worker gives the draws a fresh one gives.

Workers are never reused after anything but a clean run: an interruption, a failed chain or a dead worker shuts
the pool down and kills its workers (:func:`close_chain_workers`), and the next fit starts new ones. Workers end
with this process as before (:mod:`bnn.runtime.worker_process`).

One limit: a worker imported the collection's modules, and the user's, when it started. A module edited and
reloaded in this process (``importlib.reload``) afterwards is not reloaded in a warm worker: call
:func:`close_chain_workers` after such a reload. Classes defined in ``__main__`` (a notebook, a script) are sent by
value with each fit and are always current.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import loky
from loky.backend import get_context

from bnn.runtime.worker_process import start_worker, stop_signals_held
from bnn.runtime.workers import WORKER_ENV

IDLE_SECONDS = 60
"""How long the workers of a finished fit wait for the next fit of this process before they end."""


@dataclass
class ChainWorkers:
    """A pool of ``size`` worker processes with the progress queue and the stop event they were started with."""

    executor: loky.ProcessPoolExecutor
    messages: Any
    stop: Any
    size: int
    owner: int
    """The process that started the pool (a forked child must not use its parent's pool)."""

    def submit(self, function: Callable[..., Any], *arguments: Any) -> Future:
        """``function(*arguments)`` in a worker (started if none is waiting) with Ctrl-C held, as it must begin."""
        with stop_signals_held():
            future = self.executor.submit(function, *arguments)
        _kill_at_exit()
        return future

    def ready(self) -> ChainWorkers:
        """The pool, cleared for a new fit: the stop event unset, reports of an earlier fit dropped."""
        self.stop.clear()
        try:
            while True:
                self.messages.get_nowait()
        except queue.Empty:
            return self


_warm: ChainWorkers | None = None
_kill_at_exit_registered = False


def _kill_at_exit() -> None:
    """Kill the idle workers when this process ends: loky's own exit hook would wait for each to shut down."""
    global _kill_at_exit_registered
    if not _kill_at_exit_registered:
        # threading's exit hooks run last registered first, and loky registers its own when its first pool starts
        threading._register_atexit(close_chain_workers)  # noqa: SLF001 - the hook loky and concurrent.futures use
        _kill_at_exit_registered = True


def chain_workers(size: int) -> ChainWorkers:
    """A pool of ``size`` workers: the warm one left by the last clean fit of this process when it has that size,
    else a new one (the workers start with the first job submitted)."""
    global _warm
    if _warm is not None and _warm.size == size and _warm.owner == os.getpid():
        return _warm.ready()
    close_chain_workers()
    with stop_signals_held():  # the first queue starts loky's resource trackers, which must ignore Ctrl-C
        context = get_context("loky")
        messages, stop = context.Queue(), context.Event()
        executor = loky.ProcessPoolExecutor(max_workers=size, context=context, env=WORKER_ENV, timeout=IDLE_SECONDS,
                                            initializer=start_worker, initargs=(os.getpid(), messages, stop))
    _warm = ChainWorkers(executor, messages, stop, size, os.getpid())
    return _warm


def close_chain_workers() -> None:
    """Shut the warm pool down, if there is one, and kill its workers; the next fit starts new workers."""
    global _warm
    pool, _warm = _warm, None
    if pool is not None and pool.owner == os.getpid():
        pool.executor.shutdown(wait=True, kill_workers=True)
