r"""Stochastic-gradient MCMC: Markov chains driven by minibatch gradients of the log joint.

SGLD (Welling & Teh 2011), its RMSprop-preconditioned form pSGLD (Li et al. 2016), SGHMC (Chen et al. 2014) and
their cyclical forms cSGLD and cSGHMC (Zhang et al. 2020) move each chain by the update rules of
:mod:`bnn.inference.sgmcmc.kernels`, with the gradient of the minibatch
log joint in the unconstrained space (:mod:`bnn.inference.sgmcmc.potential`: a learned noise :math:`\sigma` is
sampled as :math:`\log\sigma` with its Jacobian, as NUTS does). There is no Metropolis correction: the draws
carry a discretisation bias that shrinks with the step size (for a Gaussian posterior the variances are too
large by a factor :math:`(1 - \epsilon\lambda/4)^{-1}`, see the kernels) and the extra variance of the
minibatch gradients, of order :math:`\epsilon` times that gradient noise.

Each chain starts at its own MAP (``init="map"``, the default: :mod:`bnn.inference.map_search.map_starts`, from its
own prior draw, in worker processes where ``map_method`` puts them) or at a prior draw of the weights (``init="prior"``),
a learned noise in both at its most likely value given the weights
(:meth:`~bnn.inference.sgmcmc.potential.MinibatchLogJoint.start_at`). Unless ``step_size`` fixes one for all, each
chain's first step size is :math:`\epsilon_0 = s / \lambda_{max}`, :math:`s` = ``step_share`` and
:math:`\lambda_{max}` the stiffest curvature of the negative log joint at its start (:mod:`bnn.inference.sgmcmc.curvature`;
measured again where each later cycle of a cyclical chain restarts): the stiffest direction bounds a stable step
(:mod:`bnn.inference.sgmcmc.kernels`), and it grows with the data size and the noise precision, so a fixed step
that suits one data set overflows on another. Each chain then follows its plan
(:mod:`bnn.inference.sgmcmc.step_plans`): SGLD and SGHMC run ``num_warmup`` burn-in steps (discarded; pSGLD adapts
its preconditioner there) and then ``num_samples * thin`` steps, keeping every ``thin``-th position; the cyclical
samplers run ``num_cycles`` cycles of ``cycle_length`` steps, each exploring without noise at large steps, then
sampling at small ones, keeping every ``thin``-th position of the sampling part.
The chains run side by side in this process, as a leading dimension of one state (one autograd pass serves all
of them), each with its own start, minibatches and noise, from one generator seeded by ``seed``: the same seed
gives the same draws. The draws ``(chains, draws, *site_shape)`` get NUTS's convergence checks
(:mod:`bnn.inference.diagnostics.convergence`: split R-hat over the weights and over the predictions, bulk and tail ESS); when
the predictive :math:`\hat R > 1.01` the record says ``converged = False`` and a :class:`ConvergenceWarning` names the numbers.

Per-draw statistics (ArviZ's ``sample_stats``, ``(chains, draws)``): ``lp``, the minibatch estimate of the log
joint in the unconstrained space at the draw (exact with full batches), and ``step_size``, the step size there
(a polynomial schedule gives draws of unequal step; Welling & Teh weight averages by it).

Ctrl-C (or SIGTERM) during the draws returns the draws made so far (at least 4 per chain), with
``record.incomplete`` and ``record.incomplete_reason`` and an :class:`IncompleteSamplingWarning`; before that it
raises ``KeyboardInterrupt``. A state that overflows (a step size too large for the posterior's curvature)
raises ``ValueError`` saying so.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import pyro
import torch
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import (
    ChainDiagnostics,
    ConvergenceWarning,
    IncompleteSamplingWarning,
    chain_diagnostics,
)
from bnn.inference.map_search.map_starts import map_starts, stacked_sites
from bnn.inference.sgmcmc.curvature import stiffest_curvature
from bnn.inference.sgmcmc.kernels import SGHMCKernel, SGLDKernel
from bnn.inference.sgmcmc.options import (
    MIN_SAMPLES,
    ChainStart,
    CSGLDOptions,
    Dynamics,
    Preconditioner,
    SGHMCOptions,
    SGLDOptions,
    SGMCMCOptions,
)
from bnn.inference.sgmcmc.potential import MinibatchLogJoint
from bnn.inference.sgmcmc.record import CSGLDRecord, SGHMCRecord, SGLDRecord

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stop_signals import sigterm_as_keyboard_interrupt
from bnn.runtime.workers import one_torch_thread

PROGRESS_EVERY = 50  # steps between updates of the progress bar


class _Chains:
    """The run's draws so far, ``(position (C, D), lp (C,), step size (C,))`` each (one append: an interrupt cannot leave
    half a draw), and the steps taken."""

    def __init__(self) -> None:
        self.draws: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.steps = 0

    def keep(self, z: torch.Tensor, lp: torch.Tensor, step_size: torch.Tensor) -> None:
        self.draws.append((z.clone(), lp, step_size.flatten()))


def _kernel(options: SGMCMCOptions, num_data: int) -> SGLDKernel | SGHMCKernel:
    if isinstance(options, SGLDOptions):
        rmsprop = options.precondition is Preconditioner.RMSPROP
        return SGLDKernel(num_data, options.precondition_decay if rmsprop else None, options.precondition_epsilon)
    if isinstance(options, SGHMCOptions) or options.dynamics is Dynamics.HAMILTONIAN:
        return SGHMCKernel(options.friction)
    return SGLDKernel(num_data)


def _name(options: SGMCMCOptions) -> str:
    """The sampler's name in messages and bars."""
    if isinstance(options, CSGLDOptions):
        return "cSGHMC" if options.dynamics is Dynamics.HAMILTONIAN else "cSGLD"
    if isinstance(options, SGLDOptions):
        return "pSGLD" if options.precondition is Preconditioner.RMSPROP else "SGLD"
    return "SGHMC"


def _sample(name: str, log_joint: MinibatchLogJoint, kernel, options: SGMCMCOptions, z: torch.Tensor,
            first_steps: torch.Tensor, chains: _Chains) -> None:
    """Run the chains from ``z`` ``(C, D)`` at first step sizes ``first_steps`` ``(C, 1)``, keeping draws into
    ``chains``; an interrupt propagates with the draws kept so far. Where the curvature set the first steps, a cycle
    that restarts (:meth:`~bnn.inference.sgmcmc.step_plans.CyclicalPlan.restarts`) sets them again from the curvature
    where the chain is then: the mode the last cycle found may be sharper than the one it started from."""
    plan, num_chains = options.plan(), options.num_chains
    total = plan.total
    kernel.start(z, first_steps)
    with progress_bar(total=total, desc=f"{name} ({num_chains} chains)", enabled=options.progress, leave=False) as bar:
        for step in range(total):
            if plan.restarts(step) and options.fixed_step_size() is None:
                first_steps, _ = _curvature_steps(options, log_joint, z)
            step_size = first_steps * plan.step_factor(step)
            lp, gradient = log_joint.gradient(z, log_joint.next_batches(num_chains))
            if plan.keeps(step):
                chains.keep(z, lp, step_size)
            z = kernel.step(z, gradient, step_size, adapt=plan.adapts(step), explore=plan.explores(step))
            chains.steps = step + 1
            if not torch.isfinite(z).all():
                bad = sorted(set(torch.nonzero(~torch.isfinite(z))[:, 0].tolist()))
                sizes = ", ".join(f"{step_size[chain].item():.3g}" for chain in bad)
                knob = "step_size" if options.fixed_step_size() is not None else "step_share"
                raise ValueError(f"{name} diverged: the state of chain(s) {bad} overflowed at step {step} (step size "
                                 f"{sizes}); the step is too large for the posterior's curvature: lower "
                                 f"{knob}{kernel.overflow_advice}")
            if step % PROGRESS_EVERY == PROGRESS_EVERY - 1 or step == total - 1:
                bar.update(step + 1 - bar.n)


def _convergence_message(name: str, options: SGMCMCOptions, diagnostics: ChainDiagnostics) -> str:
    return (f"{name} did not converge: " + "; ".join(diagnostics.problems()) + f". {options.longer_run.capitalize()}, "
            "run two or more chains (num_chains), or tune step_share (or step_size); see posterior.record.diagnostics.")


def run_sgmcmc(model, x: torch.Tensor, y: torch.Tensor, options: SGMCMCOptions) -> Posterior:
    r"""Sample the posterior of ``model`` given ``(x, y)`` with SGLD/pSGLD (:class:`SGLDOptions`), SGHMC
    (:class:`SGHMCOptions`) or cSGLD/cSGHMC (:class:`CSGLDOptions`).

    Returns
    -------
    Posterior
        Draws ``(num_chains, num_samples, *site_shape)`` (fewer after an interrupt), ``sample_stats``
        ``lp`` and ``step_size``, and an :class:`~bnn.inference.sgmcmc.record.SGLDRecord`,
        :class:`~bnn.inference.sgmcmc.record.SGHMCRecord` or :class:`~bnn.inference.sgmcmc.record.CSGLDRecord`
        with the diagnostics; for pSGLD,
        ``extras["preconditioner"]``, the frozen gain :math:`G` of each chain by site, ``(num_chains, *site_shape)``
        (in the unconstrained space).

    Warns
    -----
    ConvergenceWarning
        When the chains fail the verdict of :mod:`bnn.inference.diagnostics.convergence` (one chain, predictive
        :math:`\hat{R} > 1.01`, or too small an ESS).
    IncompleteSamplingWarning
        When the run was interrupted (Ctrl-C, SIGTERM) during the draws.

    Raises
    ------
    ValueError
        For a bad option (before any step), or when a chain overflows.
    KeyboardInterrupt
        When Ctrl-C came before every chain had 4 draws.
    """
    name = _name(options)
    start = time.perf_counter()
    chains, log_joint, kernel, starts, interrupt = _run(name, model, x, y, options)
    train_seconds = time.perf_counter() - start
    samples, stats = _stack(chains, log_joint, options.num_chains)
    num_draws = len(chains.draws)
    diagnostics = chain_diagnostics(model, samples, x, np.zeros((options.num_chains, num_draws), dtype=bool))
    incomplete = {}
    if interrupt is not None:
        cause = f"{type(interrupt).__name__}: {interrupt}" if str(interrupt) else type(interrupt).__name__
        incomplete = {"incomplete": True, "incomplete_reason": f"interrupted ({cause}) at step {chains.steps}; kept "
                      f"{num_draws} of {options.plan().num_samples} draws per chain"}
        warnings.warn(f"{name} returns fewer draws than asked: {incomplete['incomplete_reason']}. See posterior.record.",
                      IncompleteSamplingWarning, stacklevel=4)
    if not diagnostics.converged:
        warnings.warn(_convergence_message(name, options, diagnostics), ConvergenceWarning, stacklevel=4)
    record = _record(options, chains.steps, log_joint.batch_size, diagnostics, train_seconds, starts, incomplete)
    gain = getattr(kernel, "second_moment", None) is not None
    extras = {"preconditioner": log_joint.split(kernel.preconditioner())} if gain else None
    return Posterior(model, samples, x, y, record, sample_stats=stats, extras=extras)


def _run(name: str, model, x: torch.Tensor, y: torch.Tensor, options: SGMCMCOptions):
    """Fit the chains' MAP starts where ``init="map"``, then run the chains on one torch thread; return their draws,
    the log joint, the kernel, the starts (:class:`_Starts`) and the interrupt that stopped them after enough draws
    (``None`` when they finished)."""
    chains, interrupt = _Chains(), None
    fits = None
    if options.init is ChainStart.MAP:
        fits = map_starts(model, x, y, options, options.seed, options.num_chains, options.workers(), options.progress)
    with one_torch_thread(), seeded(options.seed), pyro.validation_enabled(False), sigterm_as_keyboard_interrupt():
        # its distributions skip argument checks
        log_joint = MinibatchLogJoint(model, x, y, options.batch_rows(model, x.shape[0]), options.temperature)
        kernel = _kernel(options, log_joint.num_data)
        z = log_joint.start(options.num_chains) if fits is None else log_joint.start_at(stacked_sites(model, fits))
        starts = _first_steps(options, log_joint, z, fits)
        try:
            _sample(name, log_joint, kernel, options, z, starts.first_steps, chains)
        except KeyboardInterrupt as error:
            if len(chains.draws) < MIN_SAMPLES:
                raise
            interrupt = error
    return chains, log_joint, kernel, starts, interrupt


@dataclass(frozen=True)
class _Starts:
    """How the chains started: each chain's first step size ``(C, 1)``, the curvature that set it (``None`` for a
    given step size) and each MAP start's convergence (``None`` for prior starts)."""

    first_steps: torch.Tensor
    curvature: list[float] | None
    map_converged: list[bool] | None


def _first_steps(options: SGMCMCOptions, log_joint: MinibatchLogJoint, z: torch.Tensor, fits) -> _Starts:
    r"""Each chain's :math:`\epsilon_0`: the given (or pSGLD's) step size, or ``step_share`` over the stiffest
    curvature at its start."""
    converged = None if fits is None else [fit.converged for fit in fits]
    fixed = options.fixed_step_size()
    if fixed is not None:
        return _Starts(torch.full((z.shape[0], 1), fixed, dtype=z.dtype), None, converged)
    first_steps, curvature = _curvature_steps(options, log_joint, z)
    return _Starts(first_steps, curvature.tolist(), converged)


def _curvature_steps(options: SGMCMCOptions, log_joint: MinibatchLogJoint,
                     z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Each chain's :math:`\epsilon_0 = s / \lambda_{max}` at ``z``, ``(C, 1)``, and the curvature :math:`\lambda_{max}`,
    ``(C,)``."""
    curvature = stiffest_curvature(log_joint, z)
    return (options.step_share / curvature)[:, None], curvature


def _stack(chains: _Chains, log_joint: MinibatchLogJoint, num_chains: int) -> tuple[dict[str, torch.Tensor], dict]:
    """The draws of every site ``(chains, draws, *site_shape)`` in the constrained space, and the sample statistics."""
    num_draws = len(chains.draws)
    positions, lp, step_sizes = zip(*chains.draws)
    flat = torch.stack(positions, dim=1).reshape(num_chains * num_draws, log_joint.dim)
    samples = {site: value.reshape(num_chains, num_draws, *value.shape[1:])
               for site, value in log_joint.constrained(flat).items()}
    stats = {"lp": torch.stack(lp, dim=1).cpu().numpy().astype(np.float64),
             "step_size": torch.stack(step_sizes, dim=1).cpu().numpy().astype(np.float64)}
    return samples, stats


def _record(options: SGMCMCOptions, steps: int, batch_size: int, diagnostics: ChainDiagnostics, train_seconds: float,
            starts: _Starts, incomplete: dict) -> SGLDRecord | SGHMCRecord | CSGLDRecord:
    """The record of the run: its options, its starts, its steps and the chains' diagnostics."""
    first = starts.first_steps.flatten()
    common = dict(
        seed=options.seed, train_seconds=train_seconds, options=options, batch_size=batch_size,
        gradient_evaluations=steps * options.num_chains, diagnostics=diagnostics, step_sizes=first.tolist(),
        final_step_size=(first * options.plan().step_factor(steps - 1)).tolist(), curvature=starts.curvature,
        map_converged=starts.map_converged, **incomplete,
    )
    kind = {SGLDOptions: SGLDRecord, SGHMCOptions: SGHMCRecord, CSGLDOptions: CSGLDRecord}[type(options)]
    return kind(**common)
