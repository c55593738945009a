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

:func:`fit_nuts` checks the options, draws one seed per chain, and judges the draws; the rest of
the package does the sampling, one concept per module:

:mod:`bnn.inference.nuts.chain`
    A chain's job and draws, and the per-draw sampler statistics, stored as ArviZ's
    ``sample_stats`` (arrays ``(chains, draws)``): ``diverging``, ``n_steps``, ``tree_depth``,
    ``step_size``, ``acceptance_rate`` and ``energy`` (what ArviZ's ``plot_energy`` and ``bfmi`` read), defined there.
:mod:`bnn.inference.nuts.engines`
    The engines that run one chain: nutpie's Rust NUTS (:mod:`~bnn.inference.nuts.engines.nutpie`,
    the default) and Pyro's (:mod:`~bnn.inference.nuts.engines.pyro`).
:mod:`bnn.inference.nuts.chains`
    Running the chains in worker processes or in sequence, with progress bars; the same seed gives
    the same draws either way.
:mod:`bnn.inference.nuts.outcomes`
    What survives a failed chain or an interrupt.
:mod:`bnn.inference.nuts.potential`
    The flat potential :math:`-U(z)` the nutpie engine evaluates when it describes the model's program.

Convergence: ArviZ's rank-normalised split :math:`\hat{R}` (over chains, so only with two
or more) of every site, the predictive :math:`\hat{R}` of the network output at the training
inputs (``r_hat_predictive``, :mod:`bnn.inference.diagnostics.convergence`: the weights of a network are not
identifiable, its predictions are), bulk and tail ESS, the number of divergences and the
verdict ``converged`` go into ``posterior.info["diagnostics"]``; a run whose chains disagree on
the predictions (predictive :math:`\hat{R} > 1.01`) or with any divergence sets ``converged`` (also
``info["converged"]``) to ``False`` and emits a :class:`ConvergenceWarning` that says what to try.

Faults lose only their own draws (:mod:`bnn.inference.nuts.outcomes`): a chain whose engine or worker
raises is reported in ``info["failed_chains"]`` and an
:class:`~bnn.inference.diagnostics.convergence.IncompleteSamplingWarning` while the other chains go on (only
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

Cost: a draw takes up to :math:`2^{\text{max\_tree\_depth}} - 1` leapfrog steps, so on the 152-latent
toy BNN (``python -m bnn fit --method nuts --dataset toy1d``), whose draws reach the default depth of
10, the defaults (300 warmup + 700 draws per chain) cost up to about :math:`10^6` gradients
per chain, plus each chain's MAP fit (``init="map"``). The nutpie engine on the flat potential's
NumPy gradient is the fastest per gradient (``benchmarks/results/nuts_speed.md``); on Pyro's generic potential it
pays an eager run of the Pyro program per gradient, and the Pyro engine adds Python bookkeeping to every leapfrog
step. Small models take a small fraction of those gradients.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from bnn.inference.core.hierarchical_refusal import hierarchical_priors_named
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import (
    MIN_ESS_PER_CHAIN,
    ChainDiagnostics,
    ConvergenceWarning,
    chain_diagnostics,
)
from bnn.inference.nuts.chain import ChainDraws, ChainJob, Engine, InitStrategy
from bnn.inference.nuts.chains import ChainMethod
from bnn.inference.nuts.chains import sample_chains as _sample
from bnn.inference.nuts.cost import check_affordable
from bnn.inference.nuts.numba_potential import kernel_gap
from bnn.inference.nuts.options import MIN_SAMPLES, NUTSOptions
from bnn.inference.nuts.potential import PotentialKind, flat_potential_mismatch, latent_sites
from bnn.inference.nuts.record import NUTSRecord
from bnn.inference.nuts.whitening import whitens
from pyro import poutine

from bnn.runtime.memory import parameter_count
from bnn.runtime.seeding import seeded
from bnn.runtime.workers import available_cores

# ---------------------------------------------------------------------- diagnostics
CHAINS_DISAGREE_ADVICE = ("a longer adaptation and more draws (num_warmup=1000, num_samples=1000), more chains "
                          "(num_chains=4), chains started at their own MAP points (init='map', the default)")
SPREAD_ADVICE = ("more draws per chain (num_samples={}, three times as many): the spread of the predictions is set by "
                 "the chains' rarer excursions")
ONE_CHAIN_ADVICE = "two or more chains that all run to the end (num_chains=2; a failed chain's error is in posterior.record)"
DIVERGENCES_ADVICE = "a smaller step (target_accept=0.95), a longer adaptation (num_warmup=1000)"


def _convergence_message(diagnostics: ChainDiagnostics, num_chains: int, num_samples: int) -> str:
    advice = []
    if num_chains < 2 or diagnostics.failed_chains:
        advice.append(ONE_CHAIN_ADVICE)
    enough_draws = diagnostics.ess_predictive_min >= MIN_ESS_PER_CHAIN * num_chains
    if diagnostics.chains_agree is False and diagnostics.spread_only and enough_draws:
        advice.append(SPREAD_ADVICE.format(3 * num_samples))
    elif diagnostics.chains_agree is not True or not enough_draws:
        advice.append(CHAINS_DISAGREE_ADVICE)
    if diagnostics.divergences:
        advice.append(DIVERGENCES_ADVICE)
    return (f"NUTS did not converge ({num_chains} chain(s) x {num_samples} draws): " + "; ".join(diagnostics.problems())
            + ". The draws may not represent the posterior: try " + "; ".join(advice)
            + "; see posterior.record.diagnostics and posterior.sample_stats.")


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
        When the chains fail the verdict of :mod:`bnn.inference.diagnostics.convergence` (one chain or a failed one, divergences,
        predictive :math:`\hat{R} > 1.01`, too small an ESS).
    IncompleteSamplingWarning
        When a chain failed or the run was interrupted (Ctrl-C, SIGTERM).
    SequentialChainsWarning
        When ``chain_method="auto"`` wanted processes and they cannot run the model.

    Raises
    ------
    ValueError
        For a bad option, or a run whose cost estimate passes a day (:func:`~bnn.inference.nuts.cost.check_affordable`),
        before sampling; for ``chain_method="parallel"`` when processes cannot run the model.
    Exception
        The first chain's error when every chain failed; ``KeyboardInterrupt`` when Ctrl-C came
        before any chain had 4 draws.
    """
    if model.hierarchical_sites and options.init is InitStrategy.MAP:
        raise ValueError(f"method 'nuts' cannot start at init='map' for the hierarchical prior(s) "
                         f"{hierarchical_priors_named(model)} of {type(model).__name__}: a joint MAP over the weights "
                         "and their latent scales collapses the scales to zero; pass init='prior'")
    check_affordable(model, x, y, options)
    num_chains = options.chains()
    parallel = options.chain_method is ChainMethod.PARALLEL or (
        options.chain_method is ChainMethod.AUTO and num_chains > 1 and available_cores() > 1
    )
    jobs, mismatch = _plan_chains(model, x, y, options, num_chains)
    start = time.perf_counter()
    outcomes, parallel = _sample(model, x, y, jobs, parallel, options.chain_method, options.progress)
    chains, outcome_info = outcomes.resolve(MIN_SAMPLES)
    train_seconds = time.perf_counter() - start
    draws, stats = _stack(chains)
    draws.update(model.reported_values(draws))  # the weights of hierarchical priors from their standardised sites
    diagnostics = chain_diagnostics(model, draws, x, stats["diverging"], len(outcome_info.get("failed_chains") or {}))
    if not diagnostics.converged:
        warnings.warn(_convergence_message(diagnostics, len(chains), stats["diverging"].shape[1]),
                      ConvergenceWarning, stacklevel=4)
    record = NUTSRecord(
        seed=options.seed, train_seconds=train_seconds, options=options, num_chains=num_chains,
        init=jobs[0].init.value if isinstance(jobs[0].init, InitStrategy) else "values",
        chain_method="parallel" if parallel else "sequential", potential=jobs[0].potential.value, potential_reason=mismatch,
        whitened=jobs[0].whiten,
        kernel_gap=kernel_gap(model, options.temperature) if options.engine is Engine.NUTPIE and options.jit_compile
        else None,
        chain_seeds=[job.seed for job in jobs], chain_seconds=[chain.seconds for chain in chains],
        chain_backends=[chain.backend for chain in chains] if options.engine is Engine.NUTPIE else None,
        chain_gradients=[chain.gradients for chain in chains],
        gradient_evaluations=sum(chain.gradients for chain in chains), diagnostics=diagnostics, **outcome_info,
    )
    other_sites = {name: value for name, value in draws.items()
                   if name not in model.latent_shapes and name not in model.program_latent_shapes}
    return Posterior(model, draws, x, y, record, sample_stats=stats,
                     extras={"other_sites": other_sites} if other_sites else None)


def _plan_chains(model, x: torch.Tensor, y: torch.Tensor, options: NUTSOptions,
                 num_chains: int) -> tuple[list[ChainJob], str | None]:
    """One :class:`ChainJob` per chain (its seed drawn from ``options.seed``, its start), and why the fast flat
    potential does not describe the model (``None`` when it does, or for the Pyro engine, which reads the trace)."""
    engine = options.engine
    with seeded(options.seed):
        chain_seeds = torch.randint(0, 2**31 - 1, (num_chains,)).tolist()
        inits = _chain_inits(options.init, model, x, y, num_chains)
        mismatch = flat_potential_mismatch(model, x, y) if engine is Engine.NUTPIE else None  # draws a Pyro trace
    potential = PotentialKind.FLAT if engine is Engine.NUTPIE and mismatch is None else PotentialKind.TRACE
    whiten = whitens(options.whiten, x.shape[0], parameter_count(model), options.init is InitStrategy.MAP,
                     potential is PotentialKind.FLAT)  # laplace is refused with Pyro's engine, auto needs the flat potential
    jobs = [
        ChainJob(chain, chain_seeds[chain], options.num_warmup, options.num_samples, options.target_accept,
                 options.max_tree_depth, options.dense_mass, inits[chain], options.jit_compile, torch.get_default_dtype(),
                 engine, potential, options.temperature, whiten)
        for chain in range(num_chains)
    ]
    return jobs, mismatch


def _stack(chains: list[ChainDraws]) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
    """The chains' draws ``(chains, draws, *site_shape)`` in the default dtype and statistics ``(chains, draws)``."""
    dtype = torch.get_default_dtype()
    draws = {name: torch.as_tensor(np.stack([chain.samples[name] for chain in chains]), dtype=dtype)
             for name in chains[0].samples}
    return draws, {name: np.stack([chain.stats[name] for chain in chains]) for name in chains[0].stats}
