r"""Stein variational gradient descent (Liu and Wang 2016, "Stein Variational Gradient Descent: A General Purpose
Bayesian Inference Algorithm"), by Pyro's own :class:`pyro.infer.SVGD`.

**The update.** :math:`n` particles :math:`x_1, \dots, x_n`, each a vector of every latent site of the model in
Pyro's unconstrained coordinates (the weights; a learned noise's log; the log-scales and standardised weights of
hierarchical priors), move together along the direction that most decreases their KL divergence from the posterior
:math:`p` in the unit ball of a kernel's reproducing-kernel Hilbert space:

.. math::

    \phi(x) = \frac{1}{n} \sum_{j=1}^{n} \Big[ k(x_j, x)\, \nabla_{x_j} \log p(x_j)
    + \nabla_{x_j} k(x_j, x) \Big],

the first term pulling each particle towards high density (the kernel-weighted gradients of the log joint
:math:`\log p(y, x) = \log p(y \mid x) + \log p(x)` on all the training rows, the Jacobian of the unconstrained
coordinates included), the second pushing the particles apart. Each step sets every particle's gradient to
:math:`-\phi(x_i)` and lets Adam step at a rate decayed from ``lr`` to zero along a cosine over the run. The particles
start from the prior and are the posterior's ``num_samples`` draws; with :math:`n = 1` the update would be gradient
ascent to the MAP, and as :math:`n \to \infty` the particles' empirical distribution follows the Wasserstein gradient
flow of the KL divergence towards :math:`p`. The kernel and its bandwidth:
:class:`~bnn.inference.svgd.options.SVGDOptions`.

**The program.** Pyro's SVGD reads its particles correctly for a model of one latent site only, so it fits the
network's program written over one flat vector of every latent site (:mod:`bnn.inference.svgd.flat_model`).

**Its own check.** The objective recorded at each step is the particles' mean log joint in those coordinates, as Pyro's
step computes it (:math:`-1/n` times its loss). It must not still be rising over the last tenth of the run's learning
rate by more than the particles resolve (:mod:`bnn.inference.svgd.record`); else a
:class:`~bnn.inference.diagnostics.convergence.ConvergenceWarning` says so and ``record.converged`` is false. A
non-finite objective or Stein update (which would leave Adam's steps at zero and the particles still) stops the fit
naming the step and the option to lower.
"""

from __future__ import annotations

import math
import time
import warnings

import pyro
import torch
from bnn.inference.core.cosine_schedule import cosine_factors
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning
from bnn.inference.svgd.flat_model import FLAT_SITE, PARTICLES, FlatLatents
from bnn.inference.svgd.options import SVGDOptions
from bnn.inference.svgd.record import SVGDRecord
from bnn.models.network import MAX_PLATE_NESTING
from pyro.infer import SVGD
from pyro.optim import Adam

from bnn.runtime.progress import progress_bar
from bnn.runtime.seeding import seeded
from bnn.runtime.stacklevel import user_stacklevel


def run_svgd(model, x: torch.Tensor, y: torch.Tensor, options: SVGDOptions) -> Posterior:
    """Move ``options.num_samples`` particles by Pyro's SVGD for ``options.steps`` full-batch steps on ``(x, y)`` and
    return them as the posterior's draws (see the module notes), in a param store of the fit's own.

    Raises
    ------
    ValueError
        When the objective or the Stein update becomes non-finite (lower ``lr``).

    Warns
    -----
    ConvergenceWarning
        When the objective was still rising at the end by more than the particles resolve
        (:mod:`~bnn.inference.svgd.record`); the record's ``problems()`` says so too.
    """
    factors = cosine_factors(options.steps)
    history: list[float] = []
    began = time.perf_counter()
    latents = FlatLatents.of(model, x, y)
    with seeded(options.seed), pyro.get_param_store().scope():
        svgd, adam = stein_steps(latents, x, y, options)
        svgd.loss = _recording(svgd.loss, history, options.num_samples)
        bar = progress_bar(range(options.steps), desc="SVGD", enabled=options.progress, leave=False)
        with bar:
            for step in bar:
                for optimiser in adam.optim_objs.values():  # made at the first step, at the peak rate
                    for group in optimiser.param_groups:
                        group["lr"] = options.lr * factors[step]
                update = sum(svgd.step(x, y).values())  # the mean squared Stein update, by site
                if not (math.isfinite(history[-1]) and math.isfinite(update)):
                    raise ValueError(f"SVGD's objective became {history[-1]} and its mean squared update {update} at "
                                     f"step {step}; lower lr (now {options.lr})")
                if step % 50 == 0:
                    bar.set_postfix(log_joint=f"{history[-1]:.4g}")
        with torch.no_grad():
            flat = svgd.get_named_particles()[FLAT_SITE].reshape(options.num_samples, latents.dim)
            values, _ = latents.values(flat)
    train_seconds = time.perf_counter() - began
    draws = model.reported_values(values)
    record = SVGDRecord(seed=options.seed, train_seconds=train_seconds, options=options, steps_done=len(history),
                        objective=history, dimension=latents.dim,
                        noise=float(draws["sigma"].mean()) if "sigma" in draws else None)
    problems = record.problems()
    if problems:
        warnings.warn(problems[0], ConvergenceWarning, stacklevel=user_stacklevel())
    return Posterior(model, {name: value.unsqueeze(0) for name, value in draws.items()}, x, y, record)


def stein_steps(latents: FlatLatents, x: torch.Tensor, y: torch.Tensor, options: SVGDOptions) -> tuple[SVGD, Adam]:
    """Pyro's SVGD on ``latents``' program with ``options``' particles, kernel and Adam, its particles drawn from the
    prior into the current param store (the caller's own scope), and the Adam whose rate the caller schedules."""
    pyro.param(PARTICLES, latents.prior_particles(x, y, options.num_samples))  # SVGD's guide starts from these
    adam = Adam({"lr": options.lr})
    svgd = SVGD(latents.program(), options.stein_kernel(latents.dim), adam, num_particles=options.num_samples,
                max_plate_nesting=MAX_PLATE_NESTING, mode="multivariate")
    return svgd, adam


def _recording(loss, history: list[float], particles: int):
    """Pyro's SVGD loss (minus the particles' summed log joint), appending each value over ``-particles`` to
    ``history``: the particles' mean log joint, at no cost beyond the step's own."""

    def recorded(*args, **kwargs):
        value = loss(*args, **kwargs)
        history.append(-value.item() / particles)
        return value

    return recorded
