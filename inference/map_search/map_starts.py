r"""MAP fits from independent prior draws, one per member: in sequence on one torch thread, or in loky worker processes.

The deep ensemble's members, MultiSWAG's and the SG-MCMC chains' starts are such fits
(:func:`~bnn.inference.map_search.map_estimate.find_map`, in float64). Member :math:`m` draws its start under its
own seed, from ``numpy.random.SeedSequence(seed)``: independent streams, the same for the same seed. The worker
processes (one per core, each on one torch thread) ignore Ctrl-C and SIGTERM (the parent decides) and exit on their
own when the parent process is gone; the arithmetic is the same in both, so both give the same fits. A script that
fits in processes must guard its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.core.device import on_gpu
from bnn.inference.map_search.map_estimate import find_map, working_data
from bnn.inference.map_search.map_options import MapFitOptions
from loky import ProcessPoolExecutor
from tqdm import tqdm

from bnn.runtime.progress import progress_bar
from bnn.runtime.recycled_workers import recycled_worker_notice_ignored
from bnn.runtime.seeding import seeded
from bnn.runtime.stop_signals import deferred_stop_signals, first_finished, sigterm_as_keyboard_interrupt
from bnn.runtime.worker_process import start_worker, stop_signals_held
from bnn.runtime.workers import WORKER_ENV, available_cores, one_torch_thread


class MemberMethod(str, Enum):
    """How the members share the machine; all give the same members."""

    AUTO = "auto"
    """Processes when there are more than one member and core, else sequential."""
    PARALLEL = "parallel"
    """One loky worker process per core, each fitting members on one torch thread."""
    SEQUENTIAL = "sequential"
    """One member after the other in this process, on one torch thread."""


def member_workers(method: MemberMethod, count: int) -> int:
    """The worker processes ``count`` MAP fits run in under ``method`` (1: in this process)."""
    if method is MemberMethod.SEQUENTIAL:
        return 1
    cores = available_cores()
    if method is MemberMethod.PARALLEL:
        return max(2, min(count, cores))  # processes even on one core: asked for
    return min(count, cores)


@dataclass(frozen=True)
class MemberJob:
    """What one member's fit needs; picklable, so it can travel to a worker process."""

    member: int
    seed: int
    map_arguments: dict  # find_map's keyword arguments (MapFitOptions.map_fit_arguments)
    dtype: torch.dtype  # the caller's default dtype, which a worker takes on


@dataclass(frozen=True)
class MemberFit:
    """One member: its MAP weights ``theta`` ``(D,)`` and likelihood latents (float64), and how the fit went
    (``minibatch``: fitted on minibatches, :mod:`bnn.inference.map_search.minibatch_map`)."""

    theta: torch.Tensor
    latents: dict[str, torch.Tensor]
    grad_norm: float
    lbfgs_iterations: int
    converged: bool
    seconds: float
    minibatch: bool = False


def fit_member(model, x: torch.Tensor, y: torch.Tensor, job: MemberJob) -> MemberFit:
    """The MAP fit of member ``job.member`` from a prior draw under its seed (``x``, ``y`` in float64). A fit that
    stops short of ``job.tolerance`` is recorded, not warned about (the parent sums up over the members)."""
    began = time.perf_counter()
    with seeded(job.seed), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the MAP polish", category=RuntimeWarning)
        estimate = find_map(model, x, y, **job.map_arguments, progress=False)
    return MemberFit(estimate.theta, estimate.latents, estimate.grad_norm, estimate.lbfgs_iterations, estimate.converged,
                     time.perf_counter() - began, estimate.minibatch)


# ------------------------------------------------------------------ running the members
def _fit_member_in_worker(model, x: torch.Tensor, y: torch.Tensor, job: MemberJob) -> MemberFit:
    torch.set_default_dtype(job.dtype)
    return fit_member(model, x, y, job)


@dataclass
class MemberOutcomes:
    """What each member gave: its fit, or its error; and the interrupt that stopped the run, if one did."""

    fits: dict[int, MemberFit] = field(default_factory=dict)
    failures: dict[int, BaseException] = field(default_factory=dict)
    interrupt: KeyboardInterrupt | None = None


def _in_sequence(model, x, y, jobs: list[MemberJob], outcomes: MemberOutcomes, done: tqdm) -> None:
    with one_torch_thread():  # as in the workers: the same arithmetic, so the same members
        for job in jobs:
            try:
                outcomes.fits[job.member] = fit_member(model, x, y, job)
            except Exception as error:  # noqa: BLE001 - one member's failure must not lose the others
                outcomes.failures[job.member] = error
            done.update()


def _in_processes(model, x, y, jobs: list[MemberJob], outcomes: MemberOutcomes, done: tqdm, workers: int) -> None:
    """The members in ``workers`` loky processes. Ctrl-C and SIGTERM are recorded
    (:func:`~bnn.runtime.stop_signals.deferred_stop_signals`) and acted on between two waits
    (:func:`~bnn.runtime.stop_signals.first_finished`), never raised inside them."""
    with stop_signals_held():  # the first queue starts loky's resource trackers
        pool = ProcessPoolExecutor(max_workers=workers, env=WORKER_ENV, initializer=start_worker, initargs=(os.getpid(),))
    futures = {}

    def collect(future) -> None:
        error = future.exception()
        if error is None:
            outcomes.fits[futures[future]] = future.result()
        else:
            outcomes.failures[futures[future]] = error
        done.update()

    try:
        with deferred_stop_signals() as stop:
            with stop_signals_held():  # the first submit starts the workers
                futures = {pool.submit(_fit_member_in_worker, model, x, y, job): job.member for job in jobs}
            pending = set(futures)
            while pending and stop.signal is None:
                finished, pending = first_finished(pending)
                for future in finished:
                    collect(future)
            if stop.signal is not None:
                raise stop.interrupt()
    except BaseException:  # Ctrl-C, SIGTERM: keep the members finished since the last one collected, end the rest
        for future, member in futures.items():
            if future.done() and not future.cancelled() and member not in outcomes.fits and member not in outcomes.failures:
                collect(future)
        pool.shutdown(wait=True, kill_workers=True)
        raise
    pool.shutdown(wait=True)


def run_members(model, x: torch.Tensor, y: torch.Tensor, jobs: list[MemberJob], workers: int,
                progress: bool) -> MemberOutcomes:
    """Every member's outcome, in ``workers`` processes (``workers > 1``) or in sequence (a fit on a GPU too: the
    workers compute on the CPU, :mod:`bnn.inference.core.device`); Ctrl-C and SIGTERM keep the members finished and
    go into :attr:`MemberOutcomes.interrupt`."""
    outcomes = MemberOutcomes()
    done = progress_bar(total=len(jobs), desc="ensemble members", unit="member", enabled=progress, leave=False)
    try:
        with sigterm_as_keyboard_interrupt():
            if workers > 1 and not on_gpu():
                with recycled_worker_notice_ignored():  # a worker that grew on a large data set is no fault
                    _in_processes(model, x, y, jobs, outcomes, done, workers)
            else:
                _in_sequence(model, x, y, jobs, outcomes, done)
    except KeyboardInterrupt as interrupt:
        outcomes.interrupt = interrupt
    finally:
        done.close()
    return outcomes


def member_seeds(seed: int, num_members: int) -> list[int]:
    """Independent seeds of the members from ``seed`` (a ``SeedSequence``: another seed shares none of them)."""
    return [int(value) for value in np.random.SeedSequence(seed).generate_state(num_members, dtype=np.uint32) >> 1]


def map_starts(model, x: torch.Tensor, y: torch.Tensor, options: MapFitOptions, seed: int, count: int, workers: int,
               progress: bool) -> list[MemberFit]:
    """``count`` MAP fits of ``model`` to ``(x, y)`` (in float64,
    :data:`~bnn.inference.map_search.map_estimate.WORKING_DTYPE`), member seeds from ``seed``, in ``workers``
    processes (1: in sequence): all of them, or none (a failed fit, or Ctrl-C, raises; a method that keeps what
    finished, as the deep ensemble does, reads :func:`run_members`'s outcomes instead)."""
    x, y = working_data(x, y)
    seeds = member_seeds(seed, count)
    jobs = [MemberJob(member, seeds[member], options.map_fit_arguments(), torch.get_default_dtype())
            for member in range(count)]
    outcomes = run_members(model, x, y, jobs, workers, progress)
    if outcomes.interrupt is not None:
        raise outcomes.interrupt
    if outcomes.failures:
        raise outcomes.failures[min(outcomes.failures)]
    return [outcomes.fits[member] for member in range(count)]


def stacked_sites(model, fits: list[MemberFit]) -> dict[str, torch.Tensor]:
    """The fits' weights and likelihood latents as site values ``(len(fits), *site_shape)`` (float64)."""
    values = split_flat(model.sites, torch.stack([fit.theta for fit in fits]))
    return values | {name: torch.stack([fit.latents[name] for fit in fits]) for name in fits[0].latents}
