r"""One NUTS chain run by Pyro's own ``NUTS`` kernel on the model's trace, the reference engine.

Pyro simulates the Hamiltonian dynamics of :mod:`bnn.inference.nuts.fit` on its trace-based potential
:math:`U(z)` (compiled with the PyTorch JIT when ``jit_compile`` is set), with Stan-style warmup: dual
averaging of :math:`\epsilon` and a diagonal or dense mass matrix :math:`M`. A hook after every
iteration counts the potential's evaluations (the leapfrog steps), records the statistics of
:func:`~bnn.inference.nuts.chain.sampler_stats` and reports progress. The trajectory and its
bookkeeping run in Python, so each leapfrog step costs Python time on top of the gradient
(``benchmarks/results/nuts_speed.md`` compares the engines).

:func:`initial_point` also gives the nutpie engine its start.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from bnn.inference.core.temperature import UNTEMPERED, tempered
from bnn.inference.map_search.map_estimate import map_weights
from bnn.inference.nuts.chain import ChainDraws, ChainJob, InitStrategy, sampler_stats
from bnn.inference.nuts.potential import MAX_PLATE_NESTING
from pyro.infer import MCMC, NUTS
from pyro.infer.autoguide import init_to_sample, init_to_value
from pyro.infer.mcmc.util import initialize_model

from bnn.runtime.jit_deprecation import torch_jit_deprecation_ignored
from bnn.runtime.seeding import seeded


def initial_point(model, x: torch.Tensor, y: torch.Tensor, init: InitStrategy | dict[str, torch.Tensor], *,
                  jit_compile: bool, temperature: float = UNTEMPERED) -> tuple[dict[str, torch.Tensor], Callable, dict]:
    """The chain's unconstrained start, the potential :math:`U` (of the posterior tempered at ``temperature``,
    :mod:`bnn.inference.core.temperature`) and the site transforms :math:`T`.

    ``InitStrategy.MAP`` starts at :func:`~bnn.inference.map_search.map_estimate.map_weights` from a prior draw of the chain's
    seed (a start need not be the exact mode, so the polish's warning that it stopped short is not passed on; nor
    the tempered posterior's mode: the untempered MAP is a start near it)."""
    if init is InitStrategy.MAP:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="the MAP polish", category=RuntimeWarning)
            init = map_weights(model, x, y)
    strategy = init_to_sample if isinstance(init, InitStrategy) else init_to_value(values=init, fallback=init_to_sample)
    params, potential_fn, transforms, _ = initialize_model(
        tempered(model, temperature), (x, y), init_strategy=strategy, jit_compile=jit_compile, skip_jit_warnings=True,
        max_plate_nesting=MAX_PLATE_NESTING,
    )
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


class _EnergyNUTS(NUTS):
    r"""Pyro's ``NUTS`` that keeps the Hamiltonian at the start of each trajectory, ``initial_energy``
    :math:`= U(z) + \tfrac{1}{2} r_u^\top r_u`, the ``energy_current`` its ``sample`` computes and does not keep.

    ``sample`` draws the unscaled momentum :math:`r_u \sim \mathcal{N}(0, I)` with ``_sample_r`` once per
    trajectory, after caching the potential of the current point in ``_potential_energy_last``; no public route
    gives either (Pyro 1.9; test_nuts checks that the energy less the previous draw's potential is
    :math:`\tfrac{1}{2}\chi^2_d`)."""

    def _sample_r(self, name):
        r, r_unscaled = super()._sample_r(name)
        self.initial_energy = float(self._potential_energy_last + self._kinetic_energy(r_unscaled))
        return r, r_unscaled


class _StatsRecorder:
    """MCMC ``hook_fn``: records each draw's statistics and reports progress."""

    def __init__(self, job: ChainJob, potential: _CountingPotential, report: Callable[[tuple], None]) -> None:
        self.job, self.potential, self.report = job, potential, report
        self.n_steps = np.zeros(job.num_samples, dtype=np.int64)
        self.step_size = np.zeros(job.num_samples)
        self.acceptance = np.zeros(job.num_samples)
        self.energy = np.zeros(job.num_samples)
        self.previous_mean = 0.0
        self.gradients = 0

    def __call__(self, kernel: _EnergyNUTS, params, stage: str, i: int) -> None:
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
            self.energy[i] = kernel.initial_energy
        self.report((self.job.chain, stage, n_steps))

    def stats(self, divergent: list[int]) -> dict[str, np.ndarray]:
        diverging = np.zeros(self.job.num_samples, dtype=bool)
        diverging[divergent] = True
        # clip only the rounding of the difference
        return sampler_stats(diverging, self.n_steps, self.step_size, np.clip(self.acceptance, 0.0, 1.0),
                             self.energy)


def run_chain(model, x: torch.Tensor, y: torch.Tensor, job: ChainJob, report: Callable[[tuple], None]) -> ChainDraws:
    """Run one NUTS chain with Pyro (``NUTS`` + ``MCMC`` with one chain); ``report`` gets
    ``(chain, stage, n_steps)`` after every iteration (``stage`` is "Warmup" or "Sample")."""
    start = time.perf_counter()
    with seeded(job.seed), torch_jit_deprecation_ignored():
        params, potential_fn, transforms = initial_point(model, x, y, job.init, jit_compile=job.jit_compile,
                                                           temperature=job.temperature)
        potential = _CountingPotential(potential_fn)
        kernel = _EnergyNUTS(potential_fn=potential, transforms=transforms, target_accept_prob=job.target_accept,
                             max_tree_depth=job.max_tree_depth, full_mass=job.dense_mass)
        recorder = _StatsRecorder(job, potential, report)
        mcmc = MCMC(kernel, job.num_samples, warmup_steps=job.num_warmup, initial_params=params,
                    hook_fn=recorder, disable_progbar=True)
        mcmc.run()
    samples = {name: value.numpy() for name, value in mcmc.get_samples().items()}  # every site of the trace
    stats = recorder.stats(mcmc.diagnostics()["divergences"]["chain 0"])
    return ChainDraws(samples, stats, time.perf_counter() - start, recorder.gradients)
