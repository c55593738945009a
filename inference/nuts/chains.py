r"""Running the chains of a NUTS fit: in worker processes or one after the other, with a progress bar per chain.

Chains run in separate *processes* when more than one core is free (:class:`ChainMethod`), and one
after the other in this process otherwise; either way every chain runs its engine
(:data:`bnn.inference.nuts.engines.ENGINES`) on one torch thread with its own seed, so both give the
same draws. The processes come from a :class:`loky.ProcessPoolExecutor`
(:mod:`~bnn.inference.nuts.warm_workers`): its workers start a fresh interpreter (they work from scripts and from
Jupyter, where Pyro's own multi-chain MCMC hangs, and need no ``if __name__ == "__main__":`` guard, since they do
not re-run the main module), start
with ``OMP_NUM_THREADS=1`` and one torch thread, and receive the model and data pickled by loky's
pickler, cloudpickle, which sends the classes of ``__main__`` and those defined inside a function by
value: priors, likelihoods and models defined in a notebook or a ``python -c`` script run in processes
too. Where the model or data cannot be pickled at all (an attribute holding a lock or an open file;
found before any worker starts) or a worker dies, ``chain_method="auto"`` runs the chains in sequence
with a :class:`SequentialChainsWarning` saying why, and ``"parallel"`` raises ``ValueError``.

Workers report each iteration to this process through a queue (the progress bars), ignore SIGINT
and SIGTERM from their first line (:mod:`bnn.runtime.worker_process`), and stop at the next iteration once this process
sets a shared stop event: on Ctrl-C or SIGTERM, which this process records and acts on at its next poll of the
reports (within :data:`~bnn.runtime.stop_signals.POLL_SECONDS`), keeping them as ``KeyboardInterrupt`` or
``KeyboardInterrupt("SIGTERM")`` (in sequence :func:`~bnn.runtime.stop_signals.sigterm_as_keyboard_interrupt` raises
that one); the chains' outcomes, the draws made included, then come back as
:class:`~bnn.inference.nuts.outcomes.ChainOutcomes`. A chain whose iteration outlasts
:data:`STOP_GRACE_SECONDS` is not waited for: its worker is killed and its draws are lost (``failed_chains`` says
so). After a clean run the workers wait, warm, for the next fit of this process
(:mod:`~bnn.inference.nuts.warm_workers`); on every other way out the pool is shut down and its workers killed. A
worker whose parent died without shutting it down (``kill -9``) ends itself.
"""

from __future__ import annotations

import pickle
import queue
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from concurrent.futures.process import BrokenProcessPool
from enum import Enum

import torch
from bnn.inference.nuts.chain import ChainDraws, ChainJob
from bnn.inference.nuts.engines import ENGINES
from bnn.inference.nuts.outcomes import ChainInterrupted, ChainOutcomes
from bnn.inference.nuts.warm_workers import ChainWorkers, chain_workers, close_chain_workers
from loky.backend.reduction import dumps as loky_dumps
from loky.process_executor import ShutdownExecutorError, TerminatedWorkerError

from bnn.runtime.progress import progress_bar
from bnn.runtime.stop_signals import POLL_SECONDS, StopRequest, deferred_stop_signals, sigterm_as_keyboard_interrupt
from bnn.runtime.worker_process import worker_shared
from bnn.runtime.workers import available_cores, one_torch_thread

STOP_GRACE_SECONDS = 3.0
"""After Ctrl-C or SIGTERM, how long the running chains have to hand back their draws before their workers are killed."""


class SequentialChainsWarning(UserWarning):
    """The chains could not run in processes (``chain_method="auto"``) and ran one after the other instead."""


HOW_TO_GET_PROCESSES = "pass chain_method='sequential' to run the chains in this process"


class ChainMethod(str, Enum):
    """How the chains share the machine."""

    AUTO = "auto"
    """Processes when there are several chains and more than one core, else sequential."""
    PARALLEL = "parallel"
    """One worker process per chain, at most one per core."""
    SEQUENTIAL = "sequential"
    """One chain after the other in this process."""


class _NoProcesses(Exception):
    """Processes cannot run this model's chains; the message says why."""


class _ProgressBars:
    """One tqdm bar per chain, moved by the ``(chain, stage, n_steps)`` reports."""

    def __init__(self, jobs: list[ChainJob], enabled: bool) -> None:
        self.bars = [progress_bar(total=job.num_warmup + job.num_samples, desc=f"NUTS chain {job.chain}", position=job.chain,
                                  enabled=enabled, leave=False) for job in jobs]

    def __call__(self, message: tuple) -> None:
        chain, stage, n_steps = message
        self.bars[chain].update()
        self.bars[chain].set_postfix_str(f"{stage.lower()}, {n_steps} steps", refresh=False)

    def close(self) -> None:
        for bar in self.bars:
            bar.close()


# ------------------------------------------------------------------ in a worker process
def _report_to_parent(message: tuple) -> None:
    messages, stop = worker_shared()  # the progress queue and the stop event the parent started the worker with
    if stop.is_set():
        raise InterruptedError("the parent process stopped the sampling")
    messages.put(message)


def _run_chain_in_worker(problem: bytes, job: ChainJob) -> ChainDraws:
    messages, stop = worker_shared()
    if stop.is_set():
        raise InterruptedError("the parent process stopped the sampling before this chain began")
    messages.cancel_join_thread()  # exit without flushing progress messages nobody reads any more
    model, x, y = pickle.loads(problem)
    torch.set_default_dtype(job.dtype)
    return ENGINES[job.engine](model, x, y, job, _report_to_parent)


# ------------------------------------------------------------------ in this process
def _pickled(model, x, y) -> bytes:
    """``(model, x, y)`` pickled once for all workers by loky's pickler (cloudpickle)."""
    try:
        return bytes(loky_dumps((model, x, y)))
    except Exception as error:  # noqa: BLE001 - pickling raises several types
        raise _NoProcesses(f"the model or data cannot be pickled for a worker process ({type(error).__name__}: "
                           f"{error}); keep locks, open files and other handles out of the model, its prior and its "
                           "likelihood") from error


def _show_progress(futures: dict[int, Future], messages, show: Callable[[tuple], None], stop: StopRequest) -> None:
    """Pass the workers' reports to ``show`` until every chain is done or a stop signal came."""
    while stop.signal is None and not all(future.done() for future in futures.values()):
        try:
            show(messages.get(timeout=POLL_SECONDS))
            while True:
                show(messages.get_nowait())
        except queue.Empty:
            pass


def _run_in_processes(model, x, y, jobs: list[ChainJob], show: _ProgressBars) -> ChainOutcomes:
    """The chains in worker processes. Ctrl-C and SIGTERM are only recorded
    (:func:`~bnn.runtime.stop_signals.deferred_stop_signals`) and acted on between two polls of the reports: raised
    where they land, they could interrupt loky or ``concurrent.futures`` while it holds a lock its own threads need,
    and the shut-down would then wait forever."""
    problem = _pickled(model, x, y)
    outcomes = ChainOutcomes(len(jobs), jobs[0].num_samples)
    clean = False
    try:
        with deferred_stop_signals() as stop:  # a second signal during the clean-up is ignored as well
            workers, futures = _submit(min(len(jobs), available_cores()), problem, jobs)
            try:
                _show_progress(futures, workers.messages, show, stop)
            finally:
                if stop.signal is not None or not all(future.done() for future in futures.values()):
                    workers.stop.set()  # the workers stop at their next iteration
            if stop.signal is not None:
                outcomes.interrupt = stop.interrupt()
                _stop_running_chains(futures, outcomes)
            outcomes = _collect(futures, outcomes)
        clean = outcomes.interrupt is None and not outcomes.failures
        return outcomes
    finally:
        if not clean:  # only the workers of a clean run wait for the next fit
            close_chain_workers()


def _stop_running_chains(futures: dict[int, Future], outcomes: ChainOutcomes) -> None:
    """Cancel the chains no worker has begun and give the running ones :data:`STOP_GRACE_SECONDS` to hand back
    their draws; a chain that takes longer is recorded as failed (its worker is killed with the pool)."""
    for future in futures.values():
        future.cancel()
    _, late = wait_for(futures.values(), timeout=STOP_GRACE_SECONDS)
    for chain, future in futures.items():
        if future in late:
            outcomes.failures[chain] = TimeoutError(
                f"its worker did not stop within {STOP_GRACE_SECONDS:g} s of the interrupt (one iteration "
                "takes longer) and was killed; its draws are lost")


def _submit(size: int, problem: bytes, jobs: list[ChainJob]) -> tuple[ChainWorkers, dict[int, Future]]:
    """A pool of ``size`` workers and each job's future there; a warm pool that broke while it waited (one of its
    workers killed meanwhile) is replaced by a new one."""
    try:
        return _submitted(chain_workers(size), problem, jobs)
    except (BrokenProcessPool, ShutdownExecutorError):
        close_chain_workers()
        return _submitted(chain_workers(size), problem, jobs)


def _submitted(workers: ChainWorkers, problem: bytes, jobs: list[ChainJob]) -> tuple[ChainWorkers, dict[int, Future]]:
    return workers, {job.chain: workers.submit(_run_chain_in_worker, problem, job) for job in jobs}


def _collect(futures: dict[int, Future], outcomes: ChainOutcomes) -> ChainOutcomes:
    """``outcomes`` with each chain's draws or error; :class:`_NoProcesses` when a worker died."""
    futures = {chain: future for chain, future in futures.items() if chain not in outcomes.failures}  # late: lost
    errors = {chain: None if future.cancelled() else future.exception() for chain, future in futures.items()}
    broken = [error for error in errors.values() if isinstance(error, BrokenProcessPool)]
    if broken and outcomes.interrupt is None:  # a worker died: no chain's outcome is its own
        died = next((error for error in broken if isinstance(error, TerminatedWorkerError)), broken[0])
        raise _NoProcesses(f"a worker process died ({type(died).__name__}: {' '.join(str(died).split())}); "
                           "a crash, too little memory or a class the worker cannot import does this") from died
    for chain, future in futures.items():
        error = errors[chain]
        if future.cancelled() or (outcomes.interrupt is not None and isinstance(error, InterruptedError)):
            continue  # stopped before it began, or a Pyro chain stopped with no draws to give
        if isinstance(error, ChainInterrupted):
            if error.draws is not None:
                outcomes.draws[chain] = error.draws
        elif error is not None:
            outcomes.failures[chain] = error
        else:
            outcomes.draws[chain] = future.result()
    return outcomes


def _run_in_sequence(model, x, y, jobs: list[ChainJob], show: _ProgressBars) -> ChainOutcomes:
    outcomes = ChainOutcomes(len(jobs), jobs[0].num_samples)
    with one_torch_thread():
        for job in jobs:
            try:
                outcomes.draws[job.chain] = ENGINES[job.engine](model, x, y, job, show)
            except ChainInterrupted as stopped:  # the nutpie engine, with the draws it made
                if stopped.draws is not None:
                    outcomes.draws[job.chain] = stopped.draws
                outcomes.interrupt = stopped.__cause__
                break
            except KeyboardInterrupt as interrupt:
                outcomes.interrupt = interrupt
                break
            except Exception as error:  # noqa: BLE001 - one chain's failure must not lose the others
                outcomes.failures[job.chain] = error
    return outcomes


def _run_chains(model, x, y, jobs: list[ChainJob], parallel: bool, progress: bool) -> ChainOutcomes:
    """The chains' outcomes; SIGTERM stops them as Ctrl-C does, keeping the draws made."""
    show = _ProgressBars(jobs, progress)
    try:
        with sigterm_as_keyboard_interrupt():
            return (_run_in_processes if parallel else _run_in_sequence)(model, x, y, jobs, show)
    finally:
        show.close()


def sample_chains(model, x, y, jobs: list[ChainJob], parallel: bool, chain_method: ChainMethod,
                  progress: bool) -> tuple[ChainOutcomes, bool]:
    """The chains' outcomes and whether they ran in processes. When processes cannot work (the model does not
    pickle, or a worker died), ``chain_method="auto"`` runs the chains in sequence with a
    :class:`SequentialChainsWarning` and ``"parallel"`` raises ``ValueError``; both say why and what to change."""
    if parallel:
        try:
            return _run_chains(model, x, y, jobs, True, progress), True
        except _NoProcesses as obstacle:
            if chain_method is ChainMethod.PARALLEL:
                raise ValueError(f"chain_method='parallel' cannot run the chains in processes: {obstacle}; "
                                 f"{HOW_TO_GET_PROCESSES}") from obstacle.__cause__
            warnings.warn(f"NUTS runs the chains one after the other, not in processes: {obstacle}; "
                          f"{HOW_TO_GET_PROCESSES}", SequentialChainsWarning, stacklevel=5)
    return _run_chains(model, x, y, jobs, False, progress), False
