r"""The SVI loop: the state of one run between two steps, and the steps.

Step :math:`t` of :math:`T` takes the arguments of :class:`~bnn.inference.svi.minibatches.MiniBatches`,
estimates the loss :math:`-\mathcal{L}_t(\phi)` and its gradient (:mod:`bnn.inference.svi.objective`),
refuses them when they are not finite (:func:`~bnn.inference.svi.nonfinite.guarded_step`), applies
Adam, :math:`\phi_{t+1} = \phi_t + \Delta\phi_t` (:mod:`bnn.inference.svi.optimiser`), and records
:math:`\mathcal{L}_t`. With a checkpoint folder a :class:`~bnn.inference.svi.checkpoint.TrainingState`
is written every ``checkpoint_every`` steps, when a stop signal came (which then ends the run), at a
non-finite step (the state before it) and at the end.
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from typing import Any

import pyro
import torch
from bnn.inference.core.guide_draws import sample_guide
from bnn.inference.core.posterior import Posterior
from bnn.inference.svi.checkpoint import DEFAULT_CHECKPOINT_EVERY, CheckpointFolder, TrainingState, fit_fingerprint
from bnn.inference.svi.draw_checks import unusable
from bnn.inference.svi.fitted_guide import FittedGuide
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.minibatches import MiniBatches, StepPlan
from bnn.inference.svi.nonfinite import NonFiniteELBOError, NonFiniteStep, diagnose, guarded_step
from bnn.inference.svi.objective import elbo_loss, svi_pair
from bnn.inference.svi.optimiser import make_optimiser
from bnn.inference.svi.options import SVIOptions
from bnn.inference.svi.record import SVIRecord
from pyro import poutine
from pyro.infer.util import zero_grads
from pyro.optim import PyroLRScheduler

from bnn.runtime.jit_deprecation import torch_jit_deprecation_ignored
from bnn.runtime.progress import progress_bar
from bnn.runtime.stop_signals import StopRequest

RECENT = 50
"""The ELBOs averaged into the record's ``final_elbo`` and the progress bar."""


def recent_mean(elbo: list[float]) -> float:
    r"""The mean of the last :data:`RECENT` ELBOs, :math:`\frac{1}{R}\sum_{t=T-R}^{T-1} \mathcal{L}_t` (NaN for none)."""
    recent = elbo[-RECENT:]
    return sum(recent) / len(recent) if recent else math.nan


def trajectory(options: SVIOptions, plan: StepPlan) -> dict[str, Any]:
    """The options that shape a run's numbers, as its checkpoints' fingerprint records them."""
    return {"steps": plan.total_steps, "batch_size": plan.batch_size, "lr": options.lr,
            "lr_schedule": options.lr_schedule.value, "final_lr_fraction": options.final_lr_fraction,
            "num_particles": options.num_particles, "jit": plan.jit, "kl_weighting": options.kl_weighting.value,
            "kl_warmup_steps": plan.warmup_steps, "temperature": options.temperature, "seed": options.seed}


class SVILoop:
    r"""One SVI run: its loss, optimiser, minibatches, ELBO history and checkpoints.

    Build it under the fit's seed and param-store scope, after the guide: it creates no
    parameters and draws no random numbers until its first step.

    Parameters
    ----------
    model : BayesianNetwork
        The model.
    x, y : torch.Tensor
        The training data.
    guide : callable
        The built guide, and ``guide_name`` its name for the record.
    options : SVIOptions
        The fit's options.
    plan : StepPlan
        Its length :math:`T` and minibatches.
    checkpoint_dir : Path, optional
        Where checkpoints go (:func:`~bnn.inference.svi.checkpoint.checkpoint_target`).

    Attributes
    ----------
    elbo : list of float
        :math:`\mathcal{L}_t` of every step done.
    start_step : int
        The first step of this process (the checkpoint's step when resumed, else 0).
    """

    def __init__(self, model, x: torch.Tensor, y: torch.Tensor, guide, guide_name: str, options: SVIOptions,
                 plan: StepPlan, checkpoint_dir: Path | None) -> None:
        self.model, self.x, self.y, self.guide, self.guide_name = model, x, y, guide, guide_name
        self.options, self.plan = options, plan
        self.fingerprint = fit_fingerprint(model, x, y, guide_name, options.guide_options or {}, trajectory(options, plan))
        self.checkpoints = None if checkpoint_dir is None else CheckpointFolder(checkpoint_dir, self.fingerprint)
        self.loss = elbo_loss(options.num_particles, plan.jit)
        self.optimiser = make_optimiser(options.lr, options.lr_schedule, plan.total_steps, options.final_lr_fraction)
        self.svi_model, self.svi_guide = svi_pair(model, guide, options.kl_weighting, options.temperature)
        self.batches = MiniBatches(x, y, plan.batch_size, options.kl_weighting, plan.warmup_steps)
        self.elbo: list[float] = []
        self.params: tuple[tuple[torch.Tensor, ...], int] | None = None
        self.start_step = 0
        self.start, self.first_step_seconds = time.perf_counter(), 0.0

    def resume(self, folder: str | Path) -> None:
        """Continue from the checkpoint in ``folder``: its parameters, optimiser state, RNG, shuffle and ELBOs.

        Raises
        ------
        ValueError
            When the folder is missing, damaged or another fit's (:meth:`CheckpointFolder.read`).
        """
        resumed, _ = CheckpointFolder(folder, self.fingerprint).read()
        arguments, keywords = self.batches(resumed.step)
        # one loss evaluation creates the guide's parameters and compiles a JIT loss (whose first call
        # draws extra random numbers): the run being resumed did both at its step 0
        with poutine.trace(param_only=True) as capture, torch_jit_deprecation_ignored():
            self.loss.loss_and_grads(self.svi_model, self.svi_guide, *arguments, **keywords)
        zero_grads({site["value"].unconstrained() for site in capture.trace.nodes.values()})
        resumed.restore(self.optimiser)  # then the checkpoint replaces their values and the RNG state
        self.batches.permutation, self.elbo, self.start_step = resumed.permutation, resumed.elbo, resumed.step

    def run(self, stop: StopRequest) -> None:
        """Take the steps from :attr:`start_step` to :math:`T`, then write the ``finished`` checkpoint."""
        total = self.plan.total_steps
        self.start = time.perf_counter()
        bar = progress_bar(range(self.start_step, total), initial=self.start_step, total=total, desc=f"SVI ({self.guide_name})",
                           enabled=self.options.progress, leave=False)
        with torch_jit_deprecation_ignored():  # a JIT loss compiles at the first step (elbo_loss)
            for step in bar:
                self.step(step)
                if step == self.start_step:
                    self.first_step_seconds = time.perf_counter() - self.start
                if step % RECENT == 0 or step == total - 1:
                    bar.set_postfix(elbo=f"{recent_mean(self.elbo):.4g}")
                self.checkpoint_after(step + 1, stop)
        if self.checkpoints is not None:
            self.checkpoints.write(self.snapshot(total, torch.get_rng_state()), "finished")

    def step(self, step: int) -> None:
        """Step ``step``: one Adam update on its minibatch; the schedule's next rate; the ELBO recorded.

        Raises
        ------
        NonFiniteELBOError
            When the step's loss or gradient is not finite (:meth:`non_finite_stop`).
        """
        rng = torch.get_rng_state()
        arguments, keywords = self.batches(step)
        try:
            loss, params = guarded_step(self.loss, self.svi_model, self.svi_guide, self.optimiser, self.known_params(),
                                        *arguments, **keywords)
        except (NonFiniteStep, ValueError) as error:
            stopped = self.non_finite_stop(step, rng, error, arguments, keywords)
            if stopped is None:
                raise  # a ValueError that no non-finite number explains
            raise stopped from error
        if self.plan.jit:
            self.params = params, len(pyro.get_param_store())
        if isinstance(self.optimiser, PyroLRScheduler):
            self.optimiser.step()  # the schedule's next rate
        self.elbo.append(-loss)

    def known_params(self) -> tuple[torch.Tensor, ...] | None:
        """The parameters a JIT-compiled loss read at the last step, while the param store holds no new one (Pyro's
        compiled loss reads those of its first call at every step); ``None``: capture them."""
        if self.params is None or len(pyro.get_param_store()) != self.params[1]:
            return None
        return self.params[0]

    def non_finite_stop(self, step: int, rng: torch.Tensor, error: Exception, arguments: tuple,
                        keywords: dict[str, Any]) -> NonFiniteELBOError | None:
        """The error that stops the fit at ``step``, whose ``error`` a non-finite number explains, else ``None``.

        Diagnoses the step with torch's RNG back at ``rng`` (the step's own draws), saves the state
        before the step when there is a checkpoint folder, and keeps the guide's posterior unless its draws are not
        finite (a noise scale's draws at infinity) or no likelihood can be built on them (at 0).
        """
        torch.set_rng_state(rng)  # the failing step's draws, for the search and the saved state
        diagnosis = diagnose(error, self.svi_model, self.svi_guide, *arguments, **keywords)
        if diagnosis is None:
            return None
        torch.set_rng_state(rng)
        reason = f"non-finite ELBO at step {step}"
        saved = None if self.checkpoints is None else self.checkpoints.write(self.snapshot(step, rng), reason)
        with pyro.validation_enabled(False):  # a scale that underflowed to 0 still gives draws
            kept = self.posterior(self.record(step, reason))
        if unusable(self.model, self.x, kept.samples):
            kept = None  # a posterior with draws no likelihood can use
        return NonFiniteELBOError(step, *diagnosis, lr=self.options.lr, posterior=kept, checkpoint=saved)

    def checkpoint_after(self, steps_done: int, stop: StopRequest) -> None:
        """Write a checkpoint after ``steps_done`` steps when one is due or a stop signal came; on a signal, end
        the run (``KeyboardInterrupt``, naming the signal and the folder to resume from)."""
        every = DEFAULT_CHECKPOINT_EVERY if self.options.checkpoint_every is None else self.options.checkpoint_every
        received = stop.signal  # read once: a signal during the write below is handled after the next step
        if self.checkpoints is None or (received is None and steps_done % every != 0):
            return
        reason = "periodic" if received is None else f"stopped by {signal.Signals(received).name}"
        saved = self.checkpoints.write(self.snapshot(steps_done, torch.get_rng_state()), reason)
        if received is not None:
            folder = self.checkpoints.directory
            stop.stop(f"SVI {reason} after step {steps_done} of {self.plan.total_steps}; {saved} holds its state: "
                      f"continue with fit(..., resume={str(folder)!r}) or --resume {folder}")

    def snapshot(self, steps_done: int, rng: torch.Tensor) -> TrainingState:
        """The run's state after ``steps_done`` steps with torch's RNG at ``rng``."""
        return TrainingState.capture(steps_done, self.elbo, self.optimiser, rng, self.batches.permutation)

    def record(self, steps_done: int, stopped: str | None = None) -> SVIRecord:
        """The record of the run after ``steps_done`` steps (``stopped``: why it ended early)."""
        options = self.options
        return SVIRecord(
            guide=self.guide_name, seed=options.seed, train_seconds=time.perf_counter() - self.start,
            options=options, first_step_seconds=self.first_step_seconds, steps=steps_done, batch_size=self.plan.batch_size,
            kl_warmup_steps=self.plan.warmup_steps if options.kl_weighting is KLWeighting.WARMUP else None,
            resumed_from_step=self.start_step if options.resume is not None else None,
            final_elbo=recent_mean(self.elbo), elbo=list(self.elbo), stopped=stopped,
        )

    def posterior(self, record: SVIRecord) -> Posterior:
        """``options.num_samples`` draws from the guide with its current parameters, with ``record``."""
        draws = self.model.reported_values(
            sample_guide(self.guide, self.options.num_samples, self.model.program_latent_shapes, self.x, self.y))
        samples = {name: value.unsqueeze(0) for name, value in draws.items()}
        state = pyro.get_param_store().get_state()
        extras = {"guide": FittedGuide(self.guide, state), "param_state": state}
        constants = getattr(self.guide, "fitted_constants", dict)()
        return Posterior(self.model, samples, self.x, self.y, record, extras=extras, constants=constants)
