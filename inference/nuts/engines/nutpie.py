r"""One NUTS chain run by nutpie (Rust) on the model's compiled flat potential.

nutpie's sampler calls back into Python once per leapfrog step for
:math:`(\log\pi(z), \nabla_z\log\pi(z))` (:class:`bnn.inference.nuts.potential.FlatPotential` when
:func:`~bnn.inference.nuts.potential.flat_potential_mismatch` finds it describes the model's program, else
Pyro's generic :class:`~bnn.inference.nuts.potential.TracePotential`; ``ChainJob.potential`` says which); the
trajectory, the step-size and mass-matrix adaptation and the bookkeeping run in Rust, so
a gradient costs the potential's call plus a little Rust, where the Pyro engine
(:mod:`bnn.inference.nuts.engines.pyro`) pays Python for every leapfrog step
(``benchmarks/results/nuts_speed.md``). Its warmup adapts a diagonal mass matrix from the draws *and*
the gradients (nutpie's default), which gives more ESS per gradient than Stan-style adaptation on the
built-in data (``benchmarks/results/nuts_speed.md``). The start is the Pyro engine's
(:func:`~bnn.inference.nuts.engines.pyro.initial_point`), so both engines begin a chain at the same point, except
where nutpie cannot begin there (:func:`nudged_start`). A chain whose job says ``whiten`` samples the whitened
coordinates of the Laplace approximation at that start (:mod:`bnn.inference.nuts.whitening`), through the Python
callback, and its draws are mapped back.

Options: ``target_accept`` and ``max_tree_depth`` are nutpie's ``target_accept`` and
``maxdepth``; ``dense_mass=True`` is refused (nutpie has no dense mass matrix);
``jit_compile`` picks the flat potential's backend: ``auto`` when set (the compiled kernel of
:mod:`bnn.inference.nuts.numba_kernel` for a chain of dense layers with the collection's own parts, a torch module's
lowered to one included, :mod:`bnn.inference.nuts.lowering`; otherwise TorchScript, or ``torch.compile`` when the
chain's gradients at full tree depth would take long enough on TorchScript to pay for its build), else ``eager``
(the generic potential is always eager). The chain's draws say which ran (``ChainDraws.backend``).
The statistics keep the names of :mod:`bnn.inference.nuts.chain`: ``acceptance_rate`` is nutpie's
``mean_tree_accept``, ``step_size`` the adapted :math:`\epsilon` (nutpie's ``step_size_bar``; each
trajectory uses a randomly jittered multiple of it), ``tree_depth`` is computed from
``n_steps`` by :func:`bnn.inference.nuts.chain.tree_depth`, and ``energy``, the Hamiltonian at the start of the
trajectory, is nutpie's ``energy`` (at the drawn point) minus its ``energy_error`` (the drawn point's minus the start's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import torch
from bnn.inference.nuts import numba_kernel
from bnn.inference.nuts.chain import ChainDraws, ChainJob, sampler_stats
from bnn.inference.nuts.engines.pyro import initial_point
from bnn.inference.nuts.numba_potential import NumbaLogDensity
from bnn.inference.nuts.outcomes import ChainInterrupted
from bnn.inference.nuts.potential import Backend, FlatLayout, FlatPotential, PotentialKind, TracePotential
from bnn.inference.nuts.whitening import LaplaceWhitening

from bnn.runtime.lazy_arviz import load_arviz
from bnn.runtime.seeding import seeded

if TYPE_CHECKING:
    from nutpie.compile_pymc import CompiledPyMCModel

POLL_SECONDS = 0.25
DRAWS = "z"  # nutpie's one "variable": the flat unconstrained draw
ZERO_GRADIENT_NUDGE = 1e-6
"""How far (in unconstrained units) :func:`nudged_start` moves a start coordinate whose gradient is exactly 0."""


def nutpie_module() -> ModuleType:
    """nutpie, imported at the first chain after arviz is configured: nutpie imports arviz
    (:mod:`bnn.runtime.lazy_arviz`)."""
    load_arviz()
    import nutpie
    import nutpie.compile_pymc
    import nutpie.compiled_pyfunc

    return nutpie


def nudged_start(value_and_grad: Callable[[np.ndarray], tuple], start: np.ndarray) -> np.ndarray:
    r"""``start`` with every coordinate :math:`i` where :math:`\partial_i \log\pi(z) = 0` exactly moved by
    :data:`ZERO_GRADIENT_NUDGE`; the same values where there is none.

    nutpie refuses to begin a chain at a point whose gradient has an exact zero ("bad initial gradient: invalid
    initial point": it sets its first diagonal mass matrix from :math:`1/|\partial_i \log\pi|`). A ReLU network's MAP
    has such points: a hidden unit inactive on every training input has no likelihood gradient, and the polish decays
    its weights under the prior until float32 rounds some to exactly 0, where the prior's gradient
    :math:`-w/s^2` is 0 too. Moved by :math:`10^{-6}`, such a weight gets the prior's gradient :math:`-10^{-6}/s^2`;
    the log density moves by about :math:`10^{-12}/s^2` per coordinate, nothing a chain's first step notices.
    """
    _, gradient = value_and_grad(start)
    return np.where(np.asarray(gradient) == 0, start + ZERO_GRADIENT_NUDGE, start)


def on_one_torch_thread(function: Callable[[np.ndarray], tuple]) -> Callable[[np.ndarray], tuple]:
    """``function`` that first sets one torch thread in each thread that calls it.

    nutpie calls the potential from a thread of its own, and torch's thread count is set per thread: a new
    thread computes with one OpenMP thread per core, whatever ``torch.set_num_threads`` said elsewhere (a
    worker's ``OMP_NUM_THREADS=1`` reaches it, the sequential chains' :func:`~bnn.runtime.workers.one_torch_thread`
    does not). On the network sizes NUTS can sample, a second thread makes a gradient slower, not faster.
    """
    configured = threading.local()

    def call(z: np.ndarray) -> tuple:
        if not getattr(configured, "one_thread", False):
            torch.set_num_threads(1)
            configured.one_thread = True
        return function(z)

    return call


def compiled_model(potential: FlatLayout, start: np.ndarray):
    """nutpie's model around ``potential``, starting every chain at ``start`` (unconstrained): the compiled
    kernel's C callbacks for the ``numba`` backend (:func:`numba_model`), else the potential as a Python
    function (on one torch thread, :func:`on_one_torch_thread`)."""
    if getattr(potential, "backend", None) is Backend.NUMBA:
        return numba_model(potential.evaluator, start)
    return python_model(potential.value_and_grad, start)


def python_model(value_and_grad: Callable[[np.ndarray], tuple], start: np.ndarray):
    """nutpie's model around the Python function ``value_and_grad`` (called on one torch thread,
    :func:`on_one_torch_thread`), starting every chain at ``start``."""
    dim = start.shape[0]
    value_and_grad = on_one_torch_thread(value_and_grad)
    return nutpie_module().compiled_pyfunc.from_pyfunc(
        dim,
        lambda: value_and_grad,
        lambda seed1, seed2, chain: lambda z: {DRAWS: np.array(z, dtype=np.float64)},
        [np.dtype("float64")],
        [(dim,)],
        [DRAWS],
        make_initial_point_fn=lambda seed: start,
    )


def numba_model(density: NumbaLogDensity, start: np.ndarray) -> CompiledPyMCModel:
    """nutpie's model of the C callbacks :func:`~bnn.inference.nuts.numba_kernel.nutpie_log_density` and
    ``nutpie_expand`` on ``density``'s buffer, as nutpie's own numba backend builds it: the sampler calls the
    kernel directly, with neither the GIL nor a Python call per leapfrog step."""
    dim = density.dim
    return nutpie_module().compile_pymc.CompiledPyMCModel(
        dims={}, compiled_logp_func=numba_kernel.nutpie_log_density, compiled_expand_func=numba_kernel.nutpie_expand,
        initial_point_func=lambda seed: start, shared_data={}, user_data=density.buffer, n_expanded=dim,
        shape_info=([DRAWS], [slice(0, dim)], [(dim,)]), logp_func=None, expand_func=None, _n_dim=dim,
        _shapes={DRAWS: (dim,)}, _coords={},
    )


def _column(batches, name: str) -> np.ndarray:
    return np.concatenate([np.asarray(batch.column(name).to_numpy()) for batch in batches])


def _column_lists(batches, name: str) -> list:
    return [row for batch in batches for row in batch.column(name).to_pylist()]


def _is_finished(sampler) -> bool:
    try:
        return sampler.is_finished
    except TimeoutError:  # nutpie 0.16 answers "still running" with this error
        return False


def run_chain(model, x: torch.Tensor, y: torch.Tensor, job: ChainJob, report: Callable[[tuple], None]) -> ChainDraws:
    """Run one chain with nutpie; ``report`` gets ``(chain, stage, n_steps)`` for every
    iteration (a few at a time, every ``POLL_SECONDS``). A ``KeyboardInterrupt`` or ``InterruptedError``
    (raised by ``report``, or Ctrl-C) aborts the sampler and raises :class:`ChainInterrupted` with the
    draws made after warmup."""
    start_time = time.perf_counter()
    with seeded(job.seed):
        params, potential_fn, transforms = initial_point(model, x, y, job.init, jit_compile=False,
                                                         temperature=job.temperature)
    if job.potential is PotentialKind.FLAT:
        potential = FlatPotential(model, x, y, backend=Backend.AUTO if job.jit_compile else Backend.EAGER,
                                  temperature=job.temperature, gradients=job.worst_case_gradients())
    else:
        potential = TracePotential(potential_fn, transforms, params)
    start = nudged_start(potential.value_and_grad, potential.flatten(params).numpy())
    whitening = LaplaceWhitening.at(potential.value_and_grad, start) if job.whiten else None
    sampled = (compiled_model(potential, start) if whitening is None
               else python_model(whitening.log_density(potential.value_and_grad), np.zeros_like(start)))
    sampler = nutpie_module().sample(
        sampled, draws=job.num_samples, tune=job.num_warmup, chains=1, cores=1,
        seed=job.seed, progress_bar=False, target_accept=job.target_accept, maxdepth=job.max_tree_depth,
        return_raw_trace=True, blocking=False,
    )
    reported = 0
    draw_batches, interrupt = None, None
    try:
        while True:
            finished = _is_finished(sampler)
            stats = sampler.inspect().get_arrow_trace()[1] if not finished else None
            if finished:
                draw_batches, stats = sampler.wait().get_arrow_trace()
            n_steps, tuning = _column(stats, "n_steps"), _column(stats, "tuning")
            for i in range(reported, len(n_steps)):
                report((job.chain, "Warmup" if tuning[i] else "Sample", int(n_steps[i])))
            reported = len(n_steps)
            if finished:
                break
            time.sleep(POLL_SECONDS)
    except (KeyboardInterrupt, InterruptedError) as stop:  # Ctrl-C here, or the parent's stop in a worker
        if draw_batches is None:  # still running: abort and take the draws made so far
            draw_batches, stats = sampler.abort().get_arrow_trace()
        n_steps, tuning = _column(stats, "n_steps"), _column(stats, "tuning")
        interrupt = stop
    except BaseException:
        sampler.cancel()
        raise
    kept, gradients = ~tuning, int(n_steps.sum()) + (0 if whitening is None else whitening.gradients)
    if interrupt is not None and not kept.any():
        raise ChainInterrupted(job.chain, None) from interrupt
    z = np.array(_column_lists(draw_batches, DRAWS))[kept]
    z = torch.as_tensor(z if whitening is None else whitening.point(z), dtype=torch.float64)
    with torch.no_grad():
        samples = {name: value.to(job.dtype).numpy() for name, value in potential.constrained(z).items()}
    initial_energy = _column(stats, "energy") - _column(stats, "energy_error")  # H at the start of the trajectory
    stats = sampler_stats(_column(stats, "diverging")[kept], n_steps[kept], _column(stats, "step_size_bar")[kept],
                          _column(stats, "mean_tree_accept")[kept], initial_energy[kept])
    draws = ChainDraws(samples, stats, time.perf_counter() - start_time, gradients, potential.backend.value)
    if interrupt is not None:
        raise ChainInterrupted(job.chain, draws) from interrupt
    return draws


