r"""Stochastic variational inference: maximise the ELBO over the guide's parameters.

.. math::

    \mathcal{L}(\phi) = \mathbb{E}_{q_\phi(W)}\Big[\frac{N}{|B|}\sum_{i \in B} \log p(y_i \mid x_i, W)\Big]
    - \mathrm{KL}\big(q_\phi(W) \,\|\, p(W)\big)

estimated with reparameterised draws (``num_particles`` of them, vectorised) on
minibatches :math:`B` (the model's ``data`` plate rescales the likelihood by
:math:`N/|B|`). Each epoch shuffles the data and cuts it into :math:`\lfloor N/B \rfloor`
equal batches (equal sizes keep the JIT-compiled loss valid); the KL's share of each batch
is a :class:`~bnn.inference.svi.kl_weights.KLWeighting`.

A guide may take part in two optional ways: a method ``elbo_pair()`` returns the model and
guide SVI optimises in place of (model, guide) (the mean-field guides skip prior terms
they cancel analytically, local reparameterisation rewrites the likelihood), and a method
``fitted_constants()`` returns per-site arrays for the posterior's ``constant_data``
(the empirical-Bayes prior variances).

Faults lose nothing. With ``checkpoint_dir`` the loop writes a checkpoint
(:mod:`bnn.inference.svi.checkpoint`) every ``checkpoint_every`` steps, at the end, and when Ctrl-C
or SIGTERM arrives (deferred to the end of the current step, :mod:`bnn.inference.stop_signals`);
``resume`` continues from it to the same numbers as a run never stopped. A step whose loss or
gradient is not finite is not applied: the fit stops with a
:class:`~bnn.inference.svi.nonfinite.NonFiniteELBOError` that names the step and the culprits, holds
the posterior of the last finite parameters and, with ``checkpoint_dir``, saves their state.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from typing import Any

import pyro
import torch
from bnn.guides.registry import build_guide
from bnn.inference.guide_draws import sample_guide
from bnn.inference.posterior import Posterior
from bnn.inference.seeding import seeded
from bnn.inference.stop_signals import deferred_stop_signals
from bnn.inference.svi.checkpoint import CHECKPOINT_FILE, CheckpointFolder, TrainingState, fit_fingerprint
from bnn.inference.svi.kl_weights import KLWeighting, kl_scaled
from bnn.inference.svi.nonfinite import HINT, NonFiniteELBOError, NonFiniteStep, diagnose, guarded_step
from bnn.inference.svi.options import ADAM_BETAS, DEFAULT_STEPS, SVIOptions
from bnn.inference.svi.record import SVIRecord
from bnn.inference.svi.schedules import LRSchedule
from bnn.models.mlp import MAX_PLATE_NESTING
from pyro import poutine
from pyro.infer import JitTrace_ELBO, Trace_ELBO
from pyro.infer.util import zero_grads
from pyro.optim import Adam, PyroLRScheduler, PyroOptim
from tqdm.auto import tqdm

DEFAULT_CHECKPOINT_EVERY = 1000


def _plan_steps(n: int, steps: int | None, epochs: int | None, batch_size: int | None) -> tuple[int, int, int]:
    """Return ``(total steps, batch size, batches per epoch)`` for ``n`` training examples."""
    batch_size = n if batch_size is None else batch_size
    if batch_size > n:
        raise ValueError(f"batch_size {batch_size} exceeds the {n} training examples")
    batches_per_epoch = n // batch_size
    if epochs is not None:
        return epochs * batches_per_epoch, batch_size, batches_per_epoch
    return DEFAULT_STEPS if steps is None else steps, batch_size, batches_per_epoch


def likelihood_refusal(model, x: torch.Tensor, samples: dict[str, torch.Tensor]) -> str | None:
    """Why the likelihood cannot be built on the draws ``samples`` (shaped ``(1, draws, *site_shape)``), for example
    a noise scale drawn at 0, as the first line of Pyro's validation error; ``None`` when it can."""
    try:
        with pyro.validation_enabled(True):
            model.observation_distribution(x[:1], {name: value[0] for name, value in samples.items()})
    except ValueError as error:
        return str(error).splitlines()[0].rstrip(":")
    return None


def check_draws(model, x: torch.Tensor, samples: dict[str, torch.Tensor], steps_done: int, lr: float) -> None:
    """Raise ``ValueError`` when draws of the fitted guide are not finite or the likelihood cannot be built on them.

    The loss of a step is checked before its update (:func:`~bnn.inference.svi.nonfinite.guarded_step`), so only the
    last step can throw the parameters where, say, a noise scale's draws underflow to 0 or overflow.
    """
    non_finite = [name for name, value in samples.items() if not bool(torch.isfinite(value).all())]
    refusal = likelihood_refusal(model, x, samples)
    if non_finite or refusal:
        raise ValueError(f"after step {steps_done} the guide's draws of {non_finite} are not finite"
                         f"{'' if refusal is None else f' and the likelihood refuses them ({refusal})'} (the last step "
                         f"overflowed its parameters): {HINT.format(lr=lr)}")


class MiniBatches:
    """The arguments of step ``t``: minibatch ``t mod M`` of the epoch's shuffle (drawn from torch's RNG at
    the epoch's first batch) and, with a non-uniform KL weighting, the KL scale :math:`M\\pi_t`."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, weighting: KLWeighting, warmup_steps: int) -> None:
        self.x, self.y, self.batch_size = x, y, batch_size
        self.weighting, self.warmup_steps = weighting, warmup_steps
        self.batches_per_epoch = x.shape[0] // batch_size
        self.permutation = torch.arange(x.shape[0])

    def __call__(self, step: int) -> tuple[tuple, dict[str, Any]]:
        n = self.x.shape[0]
        batch = step % self.batches_per_epoch
        if self.batch_size == n:
            arguments: tuple = (self.x, self.y)
        else:
            if batch == 0:
                self.permutation = torch.randperm(n)
            index = self.permutation[batch * self.batch_size : (batch + 1) * self.batch_size]
            arguments = (self.x[index], self.y[index])
        if self.weighting is not KLWeighting.UNIFORM:
            pi = self.weighting.weight(batch=batch, num_batches=self.batches_per_epoch, step=step,
                                       warmup_steps=self.warmup_steps)
            arguments += (torch.tensor(self.batches_per_epoch * pi),)
        return arguments, {"num_data": None if self.batch_size == n else n}


def make_optimiser(lr: float, schedule: LRSchedule, total_steps: int, final_lr_fraction: float) -> PyroOptim:
    """Adam at rate ``lr`` shaped by ``schedule``; a constant rate needs no scheduler (plain Adam takes the
    same steps without its per-step cost)."""
    if schedule is LRSchedule.CONSTANT:
        return Adam({"lr": lr, "betas": ADAM_BETAS})
    return PyroLRScheduler(
        torch.optim.lr_scheduler.LambdaLR,
        {
            "optimizer": torch.optim.Adam,
            "optim_args": {"lr": lr, "betas": ADAM_BETAS},
            "lr_lambda": lambda t: schedule.factor(t, total_steps, final_lr_fraction),
        },
    )


def _checkpoint_target(checkpoint_dir, checkpoint_every, resume) -> tuple[Path | None, int]:
    """The folder checkpoints go to (``checkpoint_dir``, else the ``resume`` folder) and their period."""
    target = None if checkpoint_dir is None and resume is None else Path(checkpoint_dir or resume)
    if target is not None and (target / CHECKPOINT_FILE).exists() and (
        resume is None or Path(resume).resolve() != target.resolve()
    ):
        raise ValueError(f"{target} already holds an SVI checkpoint; continue it with resume={str(target)!r} "
                         "(--resume), or delete it or choose another checkpoint folder")
    return target, DEFAULT_CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every


def run_svi(model, x: torch.Tensor, y: torch.Tensor, options: SVIOptions) -> Posterior:
    r"""Fit ``options.guide`` to ``model`` by SVI with Adam and return draws from the fitted guide.

    Raises
    ------
    NonFiniteELBOError
        When a step's loss or gradient is not finite; names the step and the parameters or sites
        that are not finite, and holds the posterior of the parameters before that step.
    ValueError
        For a ``batch_size`` above the data's size, or a ``resume`` folder that is missing, damaged or another fit's.
    """
    guide, guide_options, lr, num_particles, jit = (options.guide, options.guide_options, options.lr,
                                                   options.num_particles, options.jit)
    num_draws, seed, progress, resume = options.num_draws, options.seed, options.progress, options.resume
    schedule, weighting, final_lr_fraction = options.lr_schedule, options.kl_weighting, options.final_lr_fraction
    n = x.shape[0]
    total_steps, batch_size, _ = _plan_steps(n, options.steps, options.epochs, options.batch_size)
    warmup_steps = max(1, math.ceil(options.warmup_fraction * total_steps))
    checkpoint_dir, checkpoint_every = _checkpoint_target(options.checkpoint_dir, options.checkpoint_every, resume)
    trajectory = {"steps": total_steps, "batch_size": batch_size, "lr": lr, "lr_schedule": schedule.value,
                  "final_lr_fraction": final_lr_fraction, "num_particles": num_particles, "jit": jit,
                  "kl_weighting": weighting.value, "kl_warmup_steps": warmup_steps, "seed": seed}

    store = pyro.get_param_store()
    with seeded(seed), store.scope(), deferred_stop_signals(checkpoint_dir is not None) as stop:
        built_guide, guide_name = build_guide(guide, model, **(guide_options or {}))
        fingerprint = fit_fingerprint(model, x, y, guide_name, guide_options or {}, trajectory)
        checkpoints = None if checkpoint_dir is None else CheckpointFolder(checkpoint_dir, fingerprint)
        elbo_class = JitTrace_ELBO if jit else Trace_ELBO
        loss = elbo_class(
            num_particles=num_particles,
            vectorize_particles=num_particles > 1,
            max_plate_nesting=MAX_PLATE_NESTING,
            **({"ignore_jit_warnings": True} if jit else {}),
        )
        optimiser = make_optimiser(lr, schedule, total_steps, final_lr_fraction)
        elbo_pair = getattr(built_guide, "elbo_pair", None)
        svi_model, svi_guide = (model, built_guide) if elbo_pair is None else elbo_pair()
        if weighting is not KLWeighting.UNIFORM:
            svi_model, svi_guide = kl_scaled(svi_model), kl_scaled(svi_guide)
        batches = MiniBatches(x, y, batch_size, weighting, warmup_steps)
        elbo_history: list[float] = []
        start_step = 0
        if resume is not None:
            resumed, _ = CheckpointFolder(resume, fingerprint).read()
            arguments, keywords = batches(resumed.step)
            # one loss evaluation creates the guide's parameters and compiles a JIT loss (whose first call
            # draws extra random numbers): the run being resumed did both at its step 0
            with poutine.trace(param_only=True) as capture:
                loss.loss_and_grads(svi_model, svi_guide, *arguments, **keywords)
            zero_grads({site["value"].unconstrained() for site in capture.trace.nodes.values()})
            resumed.restore(optimiser)  # then the checkpoint replaces their values and the RNG state
            batches.permutation, elbo_history, start_step = resumed.permutation, resumed.elbo, resumed.step

        first_step_seconds = 0.0
        start = time.perf_counter()

        def snapshot(steps_done: int, rng: torch.Tensor) -> TrainingState:
            return TrainingState.capture(steps_done, elbo_history, optimiser, rng, batches.permutation)

        def posterior(record: SVIRecord) -> Posterior:
            draws = sample_guide(built_guide, num_draws, model.latent_shapes, x, y)
            samples = {name: value.unsqueeze(0) for name, value in draws.items()}
            extras = {"guide": built_guide, "param_state": store.get_state()}
            constants = getattr(built_guide, "fitted_constants", dict)()
            return Posterior(model, samples, x, y, record, extras=extras, constants=constants)

        def record(steps_done: int, stopped: str | None = None) -> SVIRecord:
            recent = elbo_history[-50:]
            return SVIRecord(
                guide=guide_name, seed=seed, train_seconds=time.perf_counter() - start,
                first_step_seconds=first_step_seconds, steps=steps_done, batch_size=batch_size, lr=lr,
                lr_schedule=schedule.value, num_particles=num_particles, jit=jit, kl_weighting=weighting.value,
                kl_warmup_steps=warmup_steps if weighting is KLWeighting.WARMUP else None,
                resumed_from_step=start_step if resume is not None else None,
                final_elbo=sum(recent) / len(recent) if recent else math.nan, elbo=list(elbo_history), stopped=stopped,
            )

        bar = tqdm(range(start_step, total_steps), initial=start_step, total=total_steps, desc=f"SVI ({guide_name})",
                   disable=not progress, leave=False)
        for step in bar:
            rng = torch.get_rng_state()
            arguments, keywords = batches(step)
            try:
                elbo = -guarded_step(loss, svi_model, svi_guide, optimiser, *arguments, **keywords)
            except (NonFiniteStep, ValueError) as error:
                torch.set_rng_state(rng)  # the failing step's draws, for the search and the saved state
                diagnosis = diagnose(error, svi_model, svi_guide, *arguments, **keywords)
                if diagnosis is None:
                    raise  # a ValueError that no non-finite number explains
                torch.set_rng_state(rng)
                reason = f"non-finite ELBO at step {step}"
                saved = None if checkpoints is None else checkpoints.write(snapshot(step, rng), reason)
                with pyro.validation_enabled(False):  # a scale that underflowed to 0 still gives draws
                    kept = posterior(record(step, reason))
                if likelihood_refusal(model, x, kept.samples) is not None:
                    kept = None  # a posterior no likelihood can be built on
                raise NonFiniteELBOError(step, *diagnosis, lr=lr, posterior=kept, checkpoint=saved) from error
            if isinstance(optimiser, PyroLRScheduler):
                optimiser.step()  # the schedule's next rate
            if step == start_step:
                first_step_seconds = time.perf_counter() - start
            elbo_history.append(elbo)
            if step % 50 == 0 or step == total_steps - 1:
                bar.set_postfix(elbo=f"{sum(elbo_history[-50:]) / len(elbo_history[-50:]):.4g}")
            if checkpoints is not None and (stop.signal is not None or (step + 1) % checkpoint_every == 0):
                reason = "periodic" if stop.signal is None else f"stopped by {signal.Signals(stop.signal).name}"
                saved = checkpoints.write(snapshot(step + 1, torch.get_rng_state()), reason)
                if stop.signal is not None:
                    stop.stop(f"SVI {reason} after step {step + 1} of {total_steps}; {saved} holds its state: "
                              f"continue with fit(..., resume={str(checkpoint_dir)!r}) or --resume {checkpoint_dir}")
        if checkpoints is not None:
            checkpoints.write(snapshot(total_steps, torch.get_rng_state()), "finished")
        with pyro.validation_enabled(False):  # check_draws names what a Pyro validation error would dump
            fitted = posterior(record(total_steps))
        check_draws(model, x, fitted.samples, total_steps, lr)
        return fitted
