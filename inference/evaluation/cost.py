r"""What a fit will cost, said before it is spent: gradients it needs times the measured time of one.

The time of one value-and-gradient of the log joint :math:`\log p(y \mid x, \theta) + \log p(\theta)` over the
flat weights is measured on the model and data at hand (``repeats`` calls after one untimed call, the median
kept), on the full training set and, for methods that step on minibatches, on one minibatch; NUTS by the
sampler's own potential, SVI by a short run of the method itself. Free cores are the cores less the machine's load
(:func:`free_cores`).
A fit then needs

==================  ==========================================================================================
method              gradients
==================  ==========================================================================================
``nuts``            :math:`C (W + S) (2^d - 1)` on the full data, worst case: every draw's tree at the
                    maximum depth :math:`d` (a BNN's posterior often gets there: toy1d's does); ``C`` chains,
                    ``W`` warm-up and ``S`` kept draws per chain, each a call of the sampler's potential; the
                    sampler's own work between calls is not counted (on toy1d it about doubles the time per
                    gradient); chains in parallel processes divide the wall time by :math:`\min(C, \text{free
                    cores})`
``svi``             :math:`T` steps, each timed as a whole: :data:`SVI_TIMED_STEPS` steps of the fit itself
                    (its guide, particles and minibatch; without JIT, so a JIT run is faster)
``laplace``,        :math:`A + L (1 + E)` on the full data: ``A`` Adam steps and at most ``L`` polish iterations of
``map``             at least one gradient each, for the final MAP and for each of at most ``E`` MAP refits of the
``ensemble``        search for the evidence's maximum, where the evidence chooses the prior precision (Laplace's
                    default) or a learned noise (Gaussian priors; :mod:`bnn.inference.posterior_mode.map_estimate`); Laplace's
                    curvature comes on top; an ensemble ``M`` times that (members in parallel processes as cores
                    allow)
``mc-dropout``      :math:`T` on a minibatch
``sgld``/``sghmc``  :math:`C (W + S \cdot \text{thin})` on a minibatch
==================  ==========================================================================================

Each estimate says which figure it is (worst case or floor).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import pyro
import torch
from bnn.guides.flat_weights import join_sites
from bnn.inference.fit import METHODS
from bnn.inference.nuts.potential import FlatPotential
from bnn.inference.posterior_mode import map_estimate
from bnn.inference.posterior_mode.evidence_search import MAX_EVALUATIONS
from bnn.inference.posterior_mode.log_joint import evidence_possible, log_likelihood, log_prior, prior_distributions
from bnn.inference.svi.minibatches import StepPlan

from bnn.options import Options
from bnn.runtime.seeding import seeded
from bnn.runtime.workers import available_cores

GRADIENT_REPEATS = 9
SVI_TIMED_STEPS = 11
FULL_DATA_METHODS = ("nuts", "laplace", "map", "ensemble")


@dataclass(frozen=True)
class CostEstimate:
    """The cost of one fit.

    Attributes
    ----------
    method : str
        The method.
    gradients : int
        Value-and-gradient evaluations the fit needs (per process when ``parallel`` > 1).
    seconds_per_gradient : float
        The measured time of one, on the data the method steps on (an SVI step: the whole step).
    parallel : int
        Processes sharing the work (chains or members run side by side).
    bound : str
        ``"worst case"`` (an upper bound), ``"floor"`` (a lower bound), ``"measured steps"``, or NUTS's ``"every
        tree at full depth"`` (the most gradients; the sampler's work between them comes on top).
    how : str
        The count spelled out, for the user.
    """

    method: str
    gradients: int
    seconds_per_gradient: float
    parallel: int
    bound: str
    how: str

    @property
    def seconds(self) -> float:
        """Estimated wall time: gradients times the time of one, shared by the parallel processes."""
        return self.gradients * self.seconds_per_gradient / self.parallel

    def describe(self) -> str:
        """One line: the method, the estimated time and how it was counted."""
        unit = "steps" if self.method == "svi" else "gradients"
        return (f"{self.method}: about {format_seconds(self.seconds)} ({self.bound}): {self.how} = {self.gradients:,} "
                f"{unit} x {self.seconds_per_gradient * 1e6:.0f} us"
                + (f" / {self.parallel} processes" if self.parallel > 1 else ""))


def format_seconds(seconds: float) -> str:
    """``42 s``, ``12.5 min`` or ``3.2 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def median_seconds(call: Callable[[], object], repeats: int = GRADIENT_REPEATS) -> float:
    """Median wall time of ``repeats`` calls of ``call`` after one untimed call (allocation and dispatch warm up)."""
    call()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def log_joint_gradient(model, x: torch.Tensor, y: torch.Tensor) -> Callable[[], object]:
    r"""One value-and-gradient of :math:`\log p(y \mid x, \theta) + \log p(\theta)` by autograd at a prior draw of
    the flat weights, as the MAP, Laplace and the stochastic-gradient methods take them."""
    with seeded(0):
        distributions = prior_distributions(model)
        theta = join_sites(model.sites, {name: d.sample() for name, d in distributions.items()}).to(x.dtype)
    latents = {name: torch.ones(()) for name in model.likelihood.latent_priors()}

    def call() -> None:
        point = theta.clone().requires_grad_(True)
        with pyro.validation_enabled(False), torch.enable_grad():
            total = log_likelihood(model, x, y, point, latents) + log_prior(model, point, distributions)
            torch.autograd.grad(total, point)

    return call


def nuts_potential_gradient(model, x: torch.Tensor, y: torch.Tensor) -> Callable[[], object]:
    """One value-and-gradient of the potential the NUTS engine evaluates
    (:class:`~bnn.inference.nuts.potential.FlatPotential`), at a point of small weights."""
    potential = FlatPotential(model, x, y)
    z = np.linspace(-0.5, 0.5, potential.dim)
    return lambda: potential.value_and_grad(z)


def svi_step_seconds(model, x: torch.Tensor, y: torch.Tensor, options: Options) -> float:
    """Mean wall time of an SVI step of ``options`` (without JIT, checkpoints or a progress bar), from a fit of
    :data:`SVI_TIMED_STEPS` steps, its first step (which sets up the guide) left out."""
    given = {entry.name: getattr(options, entry.name) for entry in fields(options)}
    short = {**given, "steps": SVI_TIMED_STEPS, "epochs": None, "num_samples": 1, "jit": False, "progress": False,
             "checkpoint_dir": None, "checkpoint_every": None, "resume": None}
    record = METHODS.get("svi")(model, x, y, **short).record
    return (record.train_seconds - record.first_step_seconds) / (SVI_TIMED_STEPS - 1)


def free_cores() -> int:
    """Cores the fit's processes can count on: those this process may use, less the load other work puts on them
    (the one-minute load average, this process's own share left out), at least one."""
    cores = available_cores()
    return max(1, min(cores, math.floor(cores - os.getloadavg()[0] + 1)))


def _minibatch(options: Options, n: int) -> int:
    batch_size = getattr(options, "batch_size", None)
    return n if batch_size is None else min(batch_size, n)


def gradient_count(method: str, options: Options, n: int, model=None) -> tuple[int, int, str, str] | None:
    """``(gradients, parallel processes, bound, how)`` of ``method`` under ``options`` on ``n`` examples (see the
    module docstring), or ``None`` for a method without a count here; ``model`` tells whether the MAP fits choose a
    learned noise by the evidence."""
    cores = free_cores()
    if method == "nuts":
        chains = options.num_chains or min(2, available_cores())
        leapfrogs = 2**options.max_tree_depth - 1
        iterations = options.num_warmup + options.num_samples
        return (chains * iterations * leapfrogs, min(chains, cores), "every tree at full depth",
                f"{chains} chains x ({options.num_warmup} + {options.num_samples}) draws x {leapfrogs} leapfrog steps "
                f"(tree depth {options.max_tree_depth})")
    if method == "svi":
        steps = StepPlan.of(n, options).total_steps
        return steps, 1, "measured steps", f"{steps} steps"
    if method in ("laplace", "map", "ensemble"):
        members = getattr(options, "num_members", 1)
        parallel = min(members, cores) if method == "ensemble" else 1
        # the polish's iteration limit: an option where the method has one, else the MAP fit's default
        polish = getattr(options, "map_max_iter", map_estimate.MAP_MAX_ITER)
        # the evidence search (Laplace's prior precision unless turned off; a learned noise under Gaussian priors)
        # refits the MAP, a polish each, up to MAX_EVALUATIONS times
        tuned = method == "laplace" and options.tune_prior_precision is not False
        learned_noise = model is not None and bool(model.likelihood.latent_priors()) and evidence_possible(model, 0)
        rounds = MAX_EVALUATIONS if tuned or learned_noise else 0
        tuning = f" + up to {rounds} evidence search fits x {polish}" if rounds else ""
        return (members * (options.map_steps + polish * (1 + rounds)), parallel, "worst case",
                f"{members} x ({options.map_steps} Adam steps + at most {polish} polish iterations{tuning})")
    if method == "mc-dropout":
        return options.steps, 1, "floor", f"{options.steps} steps"
    if method in ("sgld", "sghmc"):
        per_chain = options.num_warmup + options.num_samples * options.thin
        return (options.num_chains * per_chain, min(options.num_chains, cores), "floor",
                f"{options.num_chains} chains x ({options.num_warmup} + {options.num_samples} x {options.thin}) steps")
    return None


def estimate_cost(method: str, options: Options, model, x: torch.Tensor, y: torch.Tensor,
                  timings: dict[tuple[str, int], float] | None = None) -> CostEstimate | None:
    """The :class:`CostEstimate` of fitting ``model`` to ``(x, y)`` with ``method`` under the parsed ``options``;
    ``None`` for a method without a count. ``timings`` caches the measured gradient times by
    kind and rows."""
    count = gradient_count(method, options, x.shape[0], model)
    if count is None:
        return None
    gradients, parallel, bound, how = count
    rows = x.shape[0] if method in FULL_DATA_METHODS else _minibatch(options, x.shape[0])
    key = (method if method in ("nuts", "svi") else "log joint", rows)
    timings = {} if timings is None else timings
    if key not in timings:
        if method == "svi":
            timings[key] = svi_step_seconds(model, x, y, options)
        else:
            gradient = nuts_potential_gradient if method == "nuts" else log_joint_gradient
            timings[key] = median_seconds(gradient(model, x[:rows], y[:rows]))
    return CostEstimate(method, gradients, timings[key], parallel, bound, how)
