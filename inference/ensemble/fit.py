r"""Deep ensembles (Lakshminarayanan et al. 2017): :math:`M` MAP fits from independent initialisations.

Member :math:`m` maximises the log joint :math:`\log p(y \mid x, \theta) + \log p(\theta)` under the model's
own prior (a Gaussian's weight decay, a Laplace prior's L1, a scale mixture alike) from its own draw of the prior,
with :func:`~bnn.inference.posterior_mode.map_estimate.find_map` (Adam, then a Levenberg-Marquardt or L-BFGS polish, in float64
as Laplace does); a learned Gaussian noise is chosen as there (the Laplace evidence's under a Gaussian prior). Each
member is one draw, so the :class:`~bnn.inference.core.posterior.Posterior` holds one "chain" of :math:`M` independent draws,
``(1, M, *site_shape)``, and its Monte Carlo predictive is the paper's uniform mixture of the members. With
the ``heteroscedastic-gaussian`` likelihood every member predicts a mean and a scale per input, the paper's
setting (its adversarial training is not done here).

The member seeds come from ``numpy.random.SeedSequence(seed)``: independent streams, the same for the same
seed. Members run in loky worker processes (one per core, each on one torch thread) or one after the other on
one torch thread: the arithmetic is the same, so both give the same members. The workers ignore Ctrl-C and
SIGTERM (the parent decides) and exit on their own when the parent process is gone. A script that fits in
processes must guard its entry point with ``if __name__ == "__main__":``.

Faults lose only their own member: a member whose fit raises is reported in ``record.failed_members`` while
the others go on (only when every member fails does the fit raise, with the first member's error). Ctrl-C or
SIGTERM keeps the members already finished (the running ones are stopped) with ``record.incomplete`` and
an :class:`IncompleteEnsembleWarning`; it raises ``KeyboardInterrupt`` again when none had finished.
"""

from __future__ import annotations

import os
import time
import warnings
from concurrent.futures import as_completed
from dataclasses import dataclass, field

import numpy as np
import torch
from bnn.guides.flat_weights import split_flat
from bnn.inference.core.posterior import Posterior
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.ensemble.record import EnsembleRecord
from bnn.inference.posterior_mode.advice import NOT_CONVERGED, RAISE_BUDGET
from bnn.inference.posterior_mode.map_estimate import find_map
from loky import ProcessPoolExecutor
from tqdm import tqdm

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stop_signals import sigterm_as_keyboard_interrupt
from bnn.runtime.worker_process import start_worker, stop_signals_held
from bnn.runtime.workers import WORKER_ENV, one_torch_thread

WORKING_DTYPE = torch.float64  # the MAP polish needs it


class IncompleteEnsembleWarning(UserWarning):
    """An ensemble returns fewer members than asked: a member failed, or the run was interrupted."""


@dataclass(frozen=True)
class MemberJob:
    """What one member's fit needs; picklable, so it can travel to a worker process."""

    member: int
    seed: int
    steps: int
    lr: float
    tolerance: float
    max_iter: int
    dtype: torch.dtype  # the caller's default dtype, which a worker takes on


@dataclass(frozen=True)
class MemberFit:
    """One member: its MAP weights ``theta`` ``(D,)`` and likelihood latents (float64), and how the fit went."""

    theta: torch.Tensor
    latents: dict[str, torch.Tensor]
    grad_norm: float
    lbfgs_iterations: int
    converged: bool
    seconds: float


def fit_member(model, x: torch.Tensor, y: torch.Tensor, job: MemberJob) -> MemberFit:
    """The MAP fit of member ``job.member`` from a prior draw under its seed (``x``, ``y`` in float64). A fit that
    stops short of ``job.tolerance`` is recorded, not warned about (the parent sums up over the members)."""
    began = time.perf_counter()
    with seeded(job.seed), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the MAP polish stopped", category=RuntimeWarning)
        estimate = find_map(model, x, y, steps=job.steps, lr=job.lr, tolerance=job.tolerance, max_iter=job.max_iter,
                            progress=False)
    return MemberFit(estimate.theta, estimate.latents, estimate.grad_norm, estimate.lbfgs_iterations, estimate.converged,
                     time.perf_counter() - began)


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
        with stop_signals_held():  # the first submit starts the workers
            futures = {pool.submit(_fit_member_in_worker, model, x, y, job): job.member for job in jobs}
        for future in as_completed(futures):
            collect(future)
    except BaseException:  # Ctrl-C, SIGTERM: keep the members finished since the last one collected, end the rest
        for future, member in futures.items():
            if future.done() and not future.cancelled() and member not in outcomes.fits and member not in outcomes.failures:
                collect(future)
        pool.shutdown(wait=True, kill_workers=True)
        raise
    pool.shutdown(wait=True)


def run_members(model, x: torch.Tensor, y: torch.Tensor, jobs: list[MemberJob], workers: int,
                progress: bool) -> MemberOutcomes:
    """Every member's outcome, in ``workers`` processes (``workers > 1``) or in sequence; Ctrl-C and SIGTERM
    keep the members finished and go into :attr:`MemberOutcomes.interrupt`."""
    outcomes = MemberOutcomes()
    done = progress_bar(total=len(jobs), desc="ensemble members", unit="member", enabled=progress, leave=False)
    try:
        with sigterm_as_keyboard_interrupt():
            if workers > 1:
                _in_processes(model, x, y, jobs, outcomes, done, workers)
            else:
                _in_sequence(model, x, y, jobs, outcomes, done)
    except KeyboardInterrupt as interrupt:
        outcomes.interrupt = interrupt
    finally:
        done.close()
    return outcomes


def _kept(outcomes: MemberOutcomes, num_members: int) -> tuple[list[int], dict[str, object]]:
    """The members to keep and the record's fault entries; warns when members are missing.

    Raises
    ------
    KeyboardInterrupt
        The interrupt, again, when it came before any member finished.
    Exception
        The first member's error when every member failed.
    """
    kept = sorted(outcomes.fits)
    if not kept:
        if outcomes.interrupt is not None:
            raise outcomes.interrupt
        raise outcomes.failures[min(outcomes.failures)]
    faults: dict[str, object] = {}
    problems = []
    if outcomes.failures:
        faults["failed_members"] = {str(member): f"{type(error).__name__}: {error}"
                                    for member, error in sorted(outcomes.failures.items())}
        problems += [f"member {member} failed ({text})" for member, text in faults["failed_members"].items()]
    if outcomes.interrupt is not None:
        cause = type(outcomes.interrupt).__name__ + (f": {outcomes.interrupt}" if str(outcomes.interrupt) else "")
        faults["incomplete"] = True
        faults["incomplete_reason"] = f"interrupted ({cause}); kept members {kept} of {num_members}"
        problems.append(faults["incomplete_reason"])
    if problems:
        warnings.warn(f"the ensemble returns {len(kept)} of {num_members} members: " + "; ".join(problems) +
                      ". See posterior.record.", IncompleteEnsembleWarning, stacklevel=5)
    return kept, faults


def member_seeds(seed: int, num_members: int) -> list[int]:
    """Independent seeds of the members from ``seed`` (a ``SeedSequence``: another seed shares none of them)."""
    return [int(value) for value in np.random.SeedSequence(seed).generate_state(num_members, dtype=np.uint32) >> 1]


def run_ensemble(model, x: torch.Tensor, y: torch.Tensor, options: EnsembleOptions) -> Posterior:
    """Fit the :math:`M` members and return them as the draws ``(1, M_kept, *site_shape)`` of a posterior.

    Warns
    -----
    IncompleteEnsembleWarning
        When a member failed or the run was interrupted (the posterior holds the members that finished).
    RuntimeWarning
        When a member's MAP fit stopped above ``map_tolerance``.
    """
    seeds = member_seeds(options.seed, options.num_members)
    jobs = [MemberJob(member, seeds[member], options.map_steps, options.map_lr, options.map_tolerance, options.map_max_iter,
                      torch.get_default_dtype()) for member in range(options.num_members)]
    workers = options.workers()
    x_work = x.to(WORKING_DTYPE)
    y_work = y.to(WORKING_DTYPE) if y.is_floating_point() else y

    began = time.perf_counter()
    outcomes = run_members(model, x_work, y_work, jobs, workers, options.progress)
    train_seconds = time.perf_counter() - began
    kept, faults = _kept(outcomes, options.num_members)
    fits = [outcomes.fits[member] for member in kept]
    if not all(fit.converged for fit in fits):
        stalled = [member for member, fit in zip(kept, fits) if not fit.converged]
        why = NOT_CONVERGED.format(options.map_tolerance)
        warnings.warn(f"the MAP fits of ensemble members {stalled} did not converge ({why}): {RAISE_BUDGET}",
                      RuntimeWarning, stacklevel=4)

    draws = split_flat(model.sites, torch.stack([fit.theta for fit in fits]).to(x.dtype))
    draws.update({name: torch.stack([fit.latents[name] for fit in fits]).to(x.dtype)
                  for name in model.likelihood.latent_priors()})
    record = EnsembleRecord(
        seed=options.seed, train_seconds=train_seconds, options=options,
        member_method="parallel" if workers > 1 else "sequential", member_seeds=seeds, members_kept=kept,
        member_seconds=[fit.seconds for fit in fits], map_lbfgs_iterations=[fit.lbfgs_iterations for fit in fits],
        map_grad_norms=[fit.grad_norm for fit in fits], map_converged=[fit.converged for fit in fits],
        noise=[fit.latents["sigma"].item() for fit in fits] if "sigma" in fits[0].latents else None, **faults,
    )
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record)
