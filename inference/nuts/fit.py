r"""The No-U-Turn sampler: Markov chains whose draws follow the exact posterior :math:`p(W \mid \mathcal{D})`.

NUTS (Hoffman & Gelman 2014) simulates Hamiltonian dynamics in the unconstrained space
:math:`z = T(W)` (:math:`T` maps each site's support to :math:`\mathbb{R}^d`; for the
noise :math:`\sigma`, :math:`z = \log\sigma`) with the potential and the Hamiltonian

.. math::

    U(z) = -\log p(\mathcal{D} \mid T^{-1}(z)) - \log p(T^{-1}(z)) - \log\big|\det J_{T^{-1}}(z)\big|,
    \qquad H(z, r) = U(z) + \tfrac{1}{2} r^\top M^{-1} r,

doubling a leapfrog trajectory of step size :math:`\epsilon` until it turns back on itself
(or reaches :math:`2^{\text{max\_tree\_depth}} - 1` steps) and drawing the next state from
it. Warmup adapts :math:`\epsilon` by dual averaging towards a mean acceptance statistic
of ``target_accept`` and the mass matrix :math:`M` (diagonal or dense) to the posterior
covariance; warmup draws are discarded.

Chains run in separate *processes* (the ``spawn`` context, so they work from scripts and
from Jupyter, where Pyro's own multi-chain MCMC hangs) when more than one core is free,
and one after the other otherwise; either way every chain runs on one torch thread with
the same seed, so both give the same draws. A script that samples in processes must
guard its entry point with ``if __name__ == "__main__":`` (the spawn rule), and a model
must be picklable (priors and likelihoods defined in an importable module, not in a
notebook or inside a function). When it is not (checked before the workers start) or a
worker dies, ``chain_method="auto"`` runs the chains in sequence with a
:class:`SequentialChainsWarning` saying why, and ``"parallel"`` raises ``ValueError``.

Per-draw sampler statistics, stored as ArviZ's ``sample_stats`` (arrays ``(chains, draws)``):

``diverging``
    The trajectory's energy error exceeded 1000: the sampler failed to explore a region
    (draws near it are biased).
``n_steps``
    Leapfrog steps (gradient evaluations) of the draw.
``tree_depth``
    :math:`\lfloor\log_2(\text{n\_steps})\rfloor + 1`, ArviZ's convention; ``max_tree_depth``
    means the trajectory reached the cap (and may have been cut off before it turned).
``step_size``
    The adapted :math:`\epsilon`.
``acceptance_rate``
    The mean over the trajectory of :math:`\min(1, e^{H(z_0, r_0) - H(z_i, r_i)})`.

Convergence: ArviZ's rank-normalised split :math:`\hat{R}` (over chains, so only with two
or more) of every site, the predictive :math:`\hat{R}` of the network output at the training
inputs (``r_hat_predictive``, :mod:`bnn.inference.convergence`: the weights of a network are not
identifiable, its predictions are), bulk and tail ESS, the number of divergences and the
verdict ``converged`` go into ``posterior.info["diagnostics"]``; a run with
:math:`\max\hat{R} > 1.01` or any divergence sets ``converged`` (also ``info["converged"]``)
to ``False`` and emits a :class:`ConvergenceWarning` that gives the predictive :math:`\hat{R}` too.

Faults lose only their own draws (:mod:`bnn.inference.nuts.outcomes`): a chain whose engine or worker
raises is reported in ``info["failed_chains"]`` and an
:class:`~bnn.inference.nuts.outcomes.IncompleteSamplingWarning` while the other chains go on (only
when every chain fails does the fit raise, with the first chain's error). Ctrl-C
(``KeyboardInterrupt`` in this process; the workers ignore SIGINT and stop at the parent's
request) returns the chains that finished and, from the nutpie engine, the draws the running
chains made, with ``info["incomplete"] = True`` and ``info["incomplete_reason"]``. SIGTERM (a
scheduler, ``kill``) does the same while the chains run; the workers ignore it as well.

The nutpie engine evaluates the fast flat potential of :mod:`bnn.inference.nuts.potential` when it
describes the model's Pyro program (checked once before sampling,
:func:`~bnn.inference.nuts.potential.flat_potential_mismatch`), and Pyro's generic trace-based
potential otherwise; ``info["potential"]`` says which (``"flat"`` or ``"trace"``) and
``info["potential_reason"]`` why the flat one was not used. Sites of the program that the
model does not declare are sampled too and returned in ``posterior.extras["other_sites"]``.

The engine is :func:`run_chain` (one chain in, draws and statistics out as
:class:`ChainDraws`); validation, seeds, processes, progress and diagnostics do not depend
on it, so another sampler replaces that one function.

Cost: on the 152-latent toy BNN (``python -m bnn fit --method nuts --dataset toy1d``)
a draw takes up to :math:`2^{10} - 1` leapfrog steps, so the defaults (200 warmup + 200 draws
per chain, 2 chains in parallel) cost up to about :math:`4 \times 10^5` gradients per chain.
The default nutpie engine on the flat potential's NumPy gradient runs about 13,000 gradients/s
on one idle core (``benchmarks/results/nuts_speed.md``), so a chain takes well under a minute
(``make demo``: 32 s for its two chains); on Pyro's generic potential it pays an eager run of
the Pyro program per gradient instead, several times slower. The Pyro engine spends about
0.15-0.2 ms of Python per leapfrog step on top of the gradient: about 5 minutes at its 1,400
gradients/s on an idle core, several times longer when other jobs share the cores (measured
before nutpie, shared/DESIGN.md: 40 minutes at about 440 gradients/s). Small models take seconds.
"""

from __future__ import annotations

import importlib.util
import io
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import time
import types
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from bnn.inference.convergence import R_HAT_THRESHOLD, ChainDiagnostics, chain_diagnostics
from bnn.inference.nuts.outcomes import ChainInterrupted, ChainOutcomes
from bnn.inference.nuts.potential import MAX_PLATE_NESTING, PotentialKind, flat_potential_mismatch, latent_sites
from bnn.inference.nuts.record import NUTSRecord
from bnn.inference.posterior import Posterior
from bnn.inference.seeding import seeded
from bnn.inference.stop_signals import sigterm_as_keyboard_interrupt
from pyro import poutine
from pyro.infer import MCMC, NUTS
from pyro.infer.autoguide import init_to_sample, init_to_value
from pyro.infer.mcmc.util import initialize_model
from tqdm.auto import tqdm

if TYPE_CHECKING:  # the options name this module's enums
    from bnn.inference.nuts.options import NUTSOptions

MIN_SAMPLES = 4  # split R-hat and ESS need at least 4 draws per chain
MAP_STEPS = 1000
MAP_LR = 0.01
PROGRESS_POLL_SECONDS = 0.2


class ConvergenceWarning(UserWarning):
    """A NUTS run shows divergences or chains that disagree (R-hat above 1.01)."""


class SequentialChainsWarning(UserWarning):
    """The chains could not run in processes (``chain_method="auto"``) and ran one after the other instead."""


HOW_TO_GET_PROCESSES = (
    "to run chains in processes, define custom classes (priors, likelihoods, models) in an importable module "
    "(a .py file imported by the notebook or script), not in a notebook or inside a function, and guard a "
    "script's entry point with `if __name__ == \"__main__\":`; or pass chain_method='sequential'"
)


class InitStrategy(str, Enum):
    """Where each chain starts (a mapping of site values is the third choice)."""

    PRIOR = "prior"
    """A draw from the prior, different for each chain."""
    MAP = "map"
    """A short MAP fit (Adam on :math:`U(z)`, ``MAP_STEPS`` steps) from a prior draw, per chain."""


class Engine(str, Enum):
    """The NUTS implementation that runs each chain (same statistics, same ``Posterior``)."""

    NUTPIE = "nutpie"
    """nutpie's Rust NUTS on the compiled flat potential (:mod:`bnn.inference.nuts.engines.nutpie`); ~10x faster
    per gradient on the toy BNN; ignores no option, but refuses ``dense_mass=True`` (no dense mass
    matrix) and ``num_warmup=0`` (it panics without adaptation)."""
    PYRO = "pyro"
    """Pyro's ``NUTS`` on the model's trace (:func:`run_chain`), the reference."""


DEFAULT_ENGINE = Engine.NUTPIE if importlib.util.find_spec("nutpie") is not None else Engine.PYRO


def engine_function(engine: Engine) -> Callable:
    """The ``run_chain(model, x, y, job, report) -> ChainDraws`` of ``engine``."""
    if engine is Engine.NUTPIE:
        from bnn.inference.nuts.engines import nutpie as nutpie_engine  # imports this module: loaded on first use

        return nutpie_engine.run_chain
    return run_chain


class ChainMethod(str, Enum):
    """How the chains share the machine."""

    AUTO = "auto"
    """Processes when there are several chains and more than one core, else sequential."""
    PARALLEL = "parallel"
    """One ``spawn`` process per chain, at most one per core."""
    SEQUENTIAL = "sequential"
    """One chain after the other in this process."""


@dataclass(frozen=True)
class ChainJob:
    """Everything one chain needs; picklable, so it can travel to a worker process."""

    chain: int
    seed: int
    num_warmup: int
    num_samples: int
    target_accept: float
    max_tree_depth: int
    dense_mass: bool
    init: InitStrategy | dict[str, torch.Tensor]  # a strategy, or constrained site values
    jit_compile: bool
    dtype: torch.dtype
    engine: Engine = Engine.PYRO
    potential: PotentialKind = PotentialKind.TRACE  # the nutpie engine's potential; Pyro's always reads the trace


@dataclass(frozen=True)
class ChainDraws:
    """One chain's output: ``samples[site]`` of shape ``(draws, *site_shape)`` in the
    constrained space, ``stats[name]`` of shape ``(draws,)``, its wall time, and its gradient
    evaluations (leapfrog steps, warmup included)."""

    samples: dict[str, np.ndarray]
    stats: dict[str, np.ndarray]
    seconds: float
    gradients: int


def tree_depth(n_steps: np.ndarray) -> np.ndarray:
    r"""ArviZ's tree depth of each draw, :math:`\lfloor\log_2(\text{n\_steps})\rfloor + 1` (integers)."""
    return np.floor(np.log2(np.maximum(n_steps, 1))).astype(np.int64) + 1


def sampler_stats(diverging: np.ndarray, n_steps: np.ndarray, step_size: np.ndarray,
                  acceptance_rate: np.ndarray) -> dict[str, np.ndarray]:
    """The ``sample_stats`` of one chain (see the module notes), one value per draw, from any engine."""
    return {
        "diverging": np.asarray(diverging, dtype=bool),
        "n_steps": np.asarray(n_steps, dtype=np.int64),
        "tree_depth": tree_depth(n_steps),
        "step_size": np.asarray(step_size, dtype=np.float64),
        "acceptance_rate": np.asarray(acceptance_rate, dtype=np.float64),
    }


# --------------------------------------------------------------------- the Pyro engine
def map_point(potential_fn: Callable, params: dict[str, torch.Tensor], *, steps: int = MAP_STEPS,
              lr: float = MAP_LR) -> dict[str, torch.Tensor]:
    r"""Approximately :math:`\arg\min_z U(z)` by ``steps`` Adam steps from ``params`` (unconstrained)."""
    z = {name: value.detach().clone().requires_grad_() for name, value in params.items()}
    optimiser = torch.optim.Adam(list(z.values()), lr=lr)
    for _ in range(steps):
        optimiser.zero_grad()
        potential_fn(z).backward()
        optimiser.step()
    z = {name: value.detach() for name, value in z.items()}
    if not all(torch.isfinite(value).all() for value in z.values()):
        raise FloatingPointError("the MAP initialisation diverged; start from the prior (init='prior')")
    return z


def initial_point(model, x: torch.Tensor, y: torch.Tensor, init: InitStrategy | dict[str, torch.Tensor], *,
                  jit_compile: bool) -> tuple[dict[str, torch.Tensor], Callable, dict]:
    """The chain's unconstrained start, the potential :math:`U` and the site transforms :math:`T`."""
    strategy = init_to_sample if isinstance(init, InitStrategy) else init_to_value(values=init, fallback=init_to_sample)
    params, potential_fn, transforms, _ = initialize_model(
        model, (x, y), init_strategy=strategy, jit_compile=jit_compile, skip_jit_warnings=True,
        max_plate_nesting=MAX_PLATE_NESTING,
    )
    if init is InitStrategy.MAP:
        params = map_point(potential_fn, params)
    return params, potential_fn, transforms


class _CountingPotential:
    """:math:`U` that counts its evaluations (one per leapfrog step during sampling)."""

    def __init__(self, potential_fn: Callable) -> None:
        self.potential_fn = potential_fn
        self.calls = 0

    def __call__(self, z: dict[str, torch.Tensor]) -> torch.Tensor:
        self.calls += 1
        return self.potential_fn(z)

    def reset(self) -> int:
        """Return the count since the last reset and start again."""
        calls, self.calls = self.calls, 0
        return calls


class _StatsRecorder:
    """MCMC ``hook_fn``: records each draw's statistics and reports progress."""

    def __init__(self, job: ChainJob, potential: _CountingPotential, report: Callable[[tuple], None]) -> None:
        self.job, self.potential, self.report = job, potential, report
        self.n_steps = np.zeros(job.num_samples, dtype=np.int64)
        self.step_size = np.zeros(job.num_samples)
        self.acceptance = np.zeros(job.num_samples)
        self.previous_mean = 0.0
        self.gradients = 0

    def __call__(self, kernel: NUTS, params, stage: str, i: int) -> None:
        n_steps = self.potential.reset()
        self.gradients += n_steps
        if stage == "Sample":
            # Pyro keeps only the running mean m_n of the acceptance statistic over the draws, and
            # a_n = n m_n - (n - 1) m_{n-1} recovers each draw's value. No public route gives m_n
            # exactly: kernel.logging() rounds it to 3 decimals (an error n times larger in a_n) and
            # MCMC.diagnostics() holds the Metropolis acceptance count, another statistic; so the
            # attribute is read (Pyro 1.9; test_nuts checks the values lie in [0, 1]).
            mean = kernel._mean_accept_prob
            self.acceptance[i] = (i + 1) * mean - i * self.previous_mean
            self.previous_mean = mean
            self.n_steps[i] = n_steps
            self.step_size[i] = kernel.step_size
        self.report((self.job.chain, stage, n_steps))

    def stats(self, divergent: list[int]) -> dict[str, np.ndarray]:
        diverging = np.zeros(self.job.num_samples, dtype=bool)
        diverging[divergent] = True
        # clip only the rounding of the difference
        return sampler_stats(diverging, self.n_steps, self.step_size, np.clip(self.acceptance, 0.0, 1.0))


def run_chain(model, x: torch.Tensor, y: torch.Tensor, job: ChainJob, report: Callable[[tuple], None]) -> ChainDraws:
    """Run one NUTS chain with Pyro (``NUTS`` + ``MCMC`` with one chain); ``report`` gets
    ``(chain, stage, n_steps)`` after every iteration (``stage`` is "Warmup" or "Sample")."""
    start = time.perf_counter()
    with seeded(job.seed), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`torch.jit.trace` is deprecated", category=DeprecationWarning)
        params, potential_fn, transforms = initial_point(model, x, y, job.init, jit_compile=job.jit_compile)
        potential = _CountingPotential(potential_fn)
        kernel = NUTS(potential_fn=potential, transforms=transforms, target_accept_prob=job.target_accept,
                      max_tree_depth=job.max_tree_depth, full_mass=job.dense_mass)
        recorder = _StatsRecorder(job, potential, report)
        mcmc = MCMC(kernel, job.num_samples, warmup_steps=job.num_warmup, initial_params=params,
                    hook_fn=recorder, disable_progbar=True)
        mcmc.run()
    samples = {name: value.numpy() for name, value in mcmc.get_samples().items()}  # every site of the trace
    stats = recorder.stats(mcmc.diagnostics()["divergences"]["chain 0"])
    return ChainDraws(samples, stats, time.perf_counter() - start, recorder.gradients)


# ------------------------------------------------------------------ running the chains
def available_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextmanager
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


_worker_messages: Any = None  # the worker's end of the progress queue and stop event
_worker_stop: Any = None


def _start_worker(messages, stop) -> None:
    global _worker_messages, _worker_stop
    for signum in (signal.SIGINT, signal.SIGTERM):  # the parent's to handle: it stops the workers through `stop`
        signal.signal(signum, signal.SIG_IGN)
    torch.set_num_threads(1)
    messages.cancel_join_thread()  # exit without flushing progress messages nobody reads any more
    _worker_messages, _worker_stop = messages, stop


def _report_to_parent(message: tuple) -> None:
    if _worker_stop.is_set():
        raise InterruptedError("the parent process stopped the sampling")
    if not multiprocessing.parent_process().is_alive():  # the worker ignores SIGINT and SIGTERM: do not outlive the parent
        raise InterruptedError("the parent process is gone")
    _worker_messages.put(message)


def _run_chain_in_worker(model, x: torch.Tensor, y: torch.Tensor, job: ChainJob) -> ChainDraws:
    torch.set_default_dtype(job.dtype)
    return engine_function(job.engine)(model, x, y, job, _report_to_parent)


class _ProgressBars:
    """One tqdm bar per chain, moved by the ``(chain, stage, n_steps)`` reports."""

    def __init__(self, jobs: list[ChainJob], enabled: bool) -> None:
        self.bars = [tqdm(total=job.num_warmup + job.num_samples, desc=f"NUTS chain {job.chain}", position=job.chain,
                          disable=not enabled, leave=False) for job in jobs]

    def __call__(self, message: tuple) -> None:
        chain, stage, n_steps = message
        self.bars[chain].update()
        self.bars[chain].set_postfix_str(f"{stage.lower()}, {n_steps} steps", refresh=False)

    def close(self) -> None:
        for bar in self.bars:
            bar.close()


def _run_in_processes(model, x, y, jobs: list[ChainJob], show: _ProgressBars) -> ChainOutcomes:
    context = multiprocessing.get_context("spawn")
    messages, stop = context.Queue(), context.Event()
    outcomes = ChainOutcomes(len(jobs), jobs[0].num_samples)
    with ProcessPoolExecutor(max_workers=min(len(jobs), available_cores()), mp_context=context,
                             initializer=_start_worker, initargs=(messages, stop)) as pool:
        futures = {job.chain: pool.submit(_run_chain_in_worker, model, x, y, job) for job in jobs}
        try:
            while not all(future.done() for future in futures.values()):
                try:
                    show(messages.get(timeout=PROGRESS_POLL_SECONDS))
                    while True:
                        show(messages.get_nowait())
                except queue.Empty:
                    pass
        except BaseException as interrupt:
            stop.set()  # the workers stop at their next iteration
            pool.shutdown(wait=True, cancel_futures=True)
            if not isinstance(interrupt, KeyboardInterrupt):
                raise
            outcomes.interrupt = interrupt
    errors = {chain: None if future.cancelled() else future.exception() for chain, future in futures.items()}
    broken = next((error for error in errors.values() if isinstance(error, BrokenProcessPool)), None)
    if broken is not None and outcomes.interrupt is None:
        raise broken  # a worker died: no chain's outcome is its own
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
    with _one_thread():
        for job in jobs:
            try:
                outcomes.draws[job.chain] = engine_function(job.engine)(model, x, y, job, show)
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


class _MainReferences(pickle.Pickler):
    """A pickler that records the classes and functions it pickles by reference to ``__main__``."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())
        self.found: set[str] = set()

    def persistent_id(self, obj: Any) -> None:
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            self.found.add(obj.__qualname__)
        return None  # pickle everything as usual


def _process_obstacle(payload: Any) -> str | None:
    """Why ``payload`` cannot reach a ``spawn`` worker, or ``None``: it does not pickle (a class defined inside a
    function, a lambda), or it names classes of a ``__main__`` the worker cannot import (a notebook, ``python -c``)."""
    pickler = _MainReferences()
    try:
        pickler.dump(payload)
    except Exception as error:  # noqa: BLE001 - pickling raises several types
        return f"the model or data cannot be pickled for a worker process ({type(error).__name__}: {error})"
    main = sys.modules["__main__"]
    importable = getattr(main.__spec__, "name", None) is not None or getattr(main, "__file__", None) is not None
    if pickler.found and not importable:
        return (f"{sorted(pickler.found)} are defined in __main__ (a notebook or an interactive session), "
                "which a worker process cannot import")
    return None


def _sample(model, x, y, jobs: list[ChainJob], parallel: bool, chain_method: ChainMethod,
            progress: bool) -> tuple[ChainOutcomes, bool]:
    """The chains' outcomes and whether they ran in processes. When processes cannot work (checked before
    they start, or a worker died), ``chain_method="auto"`` runs the chains in sequence with a
    :class:`SequentialChainsWarning` and ``"parallel"`` raises ``ValueError``; both say why and what to change."""
    if parallel:
        obstacle, cause = _process_obstacle((model, x, y, jobs)), None
        if obstacle is None:
            try:
                return _run_chains(model, x, y, jobs, True, progress), True
            except BrokenProcessPool as error:
                obstacle, cause = (f"a worker process died ({type(error).__name__}: {error}); a script without "
                                   "`if __name__ == \"__main__\":` or a class a worker cannot load does this"), error
        if chain_method is ChainMethod.PARALLEL:
            raise ValueError(f"chain_method='parallel' cannot run the chains in processes: {obstacle}; "
                             f"{HOW_TO_GET_PROCESSES}") from cause
        warnings.warn(f"NUTS runs the chains one after the other, not in processes: {obstacle}; {HOW_TO_GET_PROCESSES}",
                      SequentialChainsWarning, stacklevel=5)
    return _run_chains(model, x, y, jobs, False, progress), False


# ---------------------------------------------------------------------- diagnostics
def _convergence_message(diagnostics: ChainDiagnostics, num_chains: int, num_samples: int) -> str:
    problems = []
    if diagnostics.r_hat_max is not None and not diagnostics.r_hat_max <= R_HAT_THRESHOLD:
        predictive = diagnostics.r_hat_predictive
        verdict = ("the chains disagree, on the predictions too" if not diagnostics.chains_agree else
                   "but they agree on the predictions: hidden units that permute between chains do this, and the "
                   "predictive R-hat is the check that matters for a network")
        problems.append(f"max R-hat {diagnostics.r_hat_max:.3f} > {R_HAT_THRESHOLD} over the weights, "
                        f"predictive R-hat (of f(x) at the training inputs) {predictive:.3f}; {verdict}")
    if diagnostics.divergences:
        problems.append(f"{diagnostics.divergences} divergent transitions of {num_chains * num_samples} draws")
    return (
        "NUTS did not converge: " + "; ".join(problems) + ". The draws may not represent the posterior: "
        "raise num_warmup and num_samples, raise target_accept (fewer divergences), or reparameterise; "
        "see posterior.record.diagnostics and posterior.sample_stats."
    )


# ----------------------------------------------------------------------- validation
def _chain_inits(init: Any, model, x, y, num_chains: int) -> list[InitStrategy | dict[str, torch.Tensor]]:
    """Each chain's start: a strategy, or the given constrained values checked against the sites."""
    if not isinstance(init, Mapping):
        return [init] * num_chains  # an InitStrategy: NUTSOptions parsed it
    sites = latent_sites(poutine.trace(model).get_trace(x, y))  # the program's sites, whatever the model declares
    shapes = {name: site["value"].shape for name, site in sites.items()}
    unknown = sorted(set(init) - set(shapes))
    if unknown:
        raise ValueError(f"init names unknown sites {unknown}; the model's latent sites are {list(shapes)}")
    per_chain: list[dict[str, torch.Tensor]] = [{} for _ in range(num_chains)]
    for name, given in init.items():
        value = torch.as_tensor(given, dtype=torch.get_default_dtype())
        shape = tuple(shapes[name])
        if tuple(value.shape) == shape:
            value = value.expand(num_chains, *shape)
        elif tuple(value.shape) != (num_chains, *shape):
            raise ValueError(
                f"init[{name!r}] has shape {tuple(value.shape)}; give the site's shape {shape} "
                f"or one value per chain, {(num_chains, *shape)}"
            )
        if not torch.isfinite(value).all() or not sites[name]["fn"].support.check(value).all():
            raise ValueError(f"init[{name!r}] lies outside the support of its prior (or is not finite)")
        for chain in range(num_chains):
            per_chain[chain][name] = value[chain].clone()
    return per_chain


# ------------------------------------------------------------------------ the method
def run_nuts(model, x: torch.Tensor, y: torch.Tensor, options: NUTSOptions) -> Posterior:
    r"""Sample the posterior of ``model`` given ``(x, y)`` with NUTS and return the draws of all chains.

    Returns
    -------
    Posterior
        Draws ``(num_chains, num_samples, *site_shape)``, ``sample_stats`` (see the module
        notes) and ``info`` with the options, ``potential``, ``diagnostics``, ``converged`` and ``chains_kept``.
        After a failed chain or Ctrl-C it holds fewer chains or draws (see
        :meth:`~bnn.inference.nuts.outcomes.ChainOutcomes.resolve`), and ``info`` says why:
        ``failed_chains``, or ``incomplete`` and ``incomplete_reason``.

    Warns
    -----
    ConvergenceWarning
        When :math:`\max\hat{R} > 1.01` (several chains) or any draw diverged.
    IncompleteSamplingWarning
        When a chain failed or the run was interrupted (Ctrl-C, SIGTERM).
    SequentialChainsWarning
        When ``chain_method="auto"`` wanted processes and they cannot run the model.

    Raises
    ------
    ValueError
        For a bad option, before sampling; for ``chain_method="parallel"`` when processes cannot run the model.
    Exception
        The first chain's error when every chain failed; ``KeyboardInterrupt`` when Ctrl-C came
        before any chain had 4 draws.
    """
    num_warmup, num_samples, target_accept, max_tree_depth = (options.num_warmup, options.num_samples,
                                                              options.target_accept, options.max_tree_depth)
    dense_mass, init, chain_method, jit_compile = options.dense_mass, options.init, options.chain_method, options.jit_compile
    engine, seed, progress = options.engine, options.seed, options.progress
    num_chains = min(2, available_cores()) if options.num_chains is None else options.num_chains
    parallel = chain_method is ChainMethod.PARALLEL or (
        chain_method is ChainMethod.AUTO and num_chains > 1 and available_cores() > 1
    )
    with seeded(seed):
        chain_seeds = torch.randint(0, 2**31 - 1, (num_chains,)).tolist()
        inits = _chain_inits(init, model, x, y, num_chains)
        mismatch = flat_potential_mismatch(model, x, y) if engine is Engine.NUTPIE else None  # draws a Pyro trace
    potential = PotentialKind.FLAT if engine is Engine.NUTPIE and mismatch is None else PotentialKind.TRACE
    jobs = [
        ChainJob(chain, chain_seeds[chain], num_warmup, num_samples, float(target_accept), max_tree_depth,
                 dense_mass, inits[chain], jit_compile, torch.get_default_dtype(), engine, potential)
        for chain in range(num_chains)
    ]

    start = time.perf_counter()
    outcomes, parallel = _sample(model, x, y, jobs, parallel, chain_method, progress)
    chains, outcome_info = outcomes.resolve(MIN_SAMPLES)
    train_seconds = time.perf_counter() - start

    dtype = torch.get_default_dtype()
    draws = {name: torch.as_tensor(np.stack([chain.samples[name] for chain in chains]), dtype=dtype)
             for name in chains[0].samples}
    stats = {name: np.stack([chain.stats[name] for chain in chains]) for name in chains[0].stats}
    diagnostics = chain_diagnostics(model, draws, x, stats["diverging"])
    if not diagnostics.converged:
        warnings.warn(_convergence_message(diagnostics, len(chains), chains[0].stats["diverging"].shape[0]),
                      ConvergenceWarning, stacklevel=4)
    record = NUTSRecord(
        seed=seed, train_seconds=train_seconds, num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
        target_accept=target_accept, max_tree_depth=max_tree_depth, dense_mass=dense_mass,
        init=inits[0].value if isinstance(inits[0], InitStrategy) else "values",
        chain_method="parallel" if parallel else "sequential", jit_compile=jit_compile, engine=engine.value,
        potential=potential.value, potential_reason=mismatch, chain_seeds=chain_seeds,
        chain_seconds=[chain.seconds for chain in chains], chain_gradients=[chain.gradients for chain in chains],
        gradient_evaluations=sum(chain.gradients for chain in chains), diagnostics=diagnostics,
        **outcome_info,
    )
    other_sites = {name: value for name, value in draws.items() if name not in model.latent_shapes}
    return Posterior(model, draws, x, y, record, sample_stats=stats,
                     extras={"other_sites": other_sites} if other_sites else None)

