r"""Stochastic variational inference: maximise the ELBO over the guide's parameters.

.. math::

    \mathcal{L}(\phi) = \mathbb{E}_{q_\phi(W)}\Big[\frac{N}{|B|}\sum_{i \in B} \log p(y_i \mid x_i, W)\Big]
    - \mathrm{KL}\big(q_\phi(W) \,\|\, p(W)\big)

estimated with reparameterised draws (``num_particles`` of them, vectorised) on
minibatches :math:`B` (the model's ``data`` plate rescales the likelihood by
:math:`N/|B|`). Each epoch shuffles the data and cuts it into :math:`\lfloor N/B \rfloor`
equal batches (equal sizes keep the JIT-compiled loss valid); the KL's share of each batch
is a :class:`~inference.kl_weights.KLWeighting`.

A guide may take part in two optional ways: a method ``elbo_pair()`` returns the model and
guide SVI optimises in place of (model, guide) (the mean-field guides skip prior terms
they cancel analytically, local reparameterisation rewrites the likelihood), and a method
``fitted_constants()`` returns per-site arrays for the posterior's ``constant_data``
(the empirical-Bayes prior variances).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pyro
import torch
from pyro import poutine
from pyro.infer import SVI, JitTrace_ELBO, Trace_ELBO
from pyro.optim import Adam, PyroLRScheduler
from tqdm.auto import tqdm

from guides.registry import build_guide
from inference.kl_weights import KLWeighting, get_kl_weighting, kl_scaled
from inference.posterior import Posterior
from inference.schedules import LRSchedule, get_schedule
from inference.seeding import seeded

MAX_PLATE_NESTING = 1


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _plan_steps(n: int, steps: int | None, epochs: int | None, batch_size: int | None) -> tuple[int, int, int]:
    """Return ``(total steps, batch size, batches per epoch)`` after validating the options."""
    if steps is not None and epochs is not None:
        raise ValueError("give steps or epochs, not both")
    batch_size = n if batch_size is None else _positive_int("batch_size", batch_size)
    if batch_size > n:
        raise ValueError(f"batch_size {batch_size} exceeds the {n} training examples")
    batches_per_epoch = n // batch_size
    if epochs is not None:
        return _positive_int("epochs", epochs) * batches_per_epoch, batch_size, batches_per_epoch
    return _positive_int("steps", 2000 if steps is None else steps), batch_size, batches_per_epoch


def sample_guide(guide, num_draws: int, shapes: dict[str, torch.Size], *args, **kwargs) -> dict[str, torch.Tensor]:
    """``num_draws`` joint draws of the latent sites from ``guide``, shaped ``(num_draws, *site_shape)``."""
    with torch.no_grad(), pyro.plate("_draws", num_draws, dim=-MAX_PLATE_NESTING - 1):
        trace = poutine.trace(guide).get_trace(*args, **kwargs)
    return {name: trace.nodes[name]["value"].reshape(num_draws, *shape) for name, shape in shapes.items()}


def fit_svi(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    guide="autonormal",
    guide_options: dict[str, Any] | None = None,
    steps: int | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    lr: float = 0.01,
    lr_schedule: str = "constant",
    final_lr_fraction: float = 0.1,
    num_particles: int = 1,
    jit: bool = False,
    kl_weighting: KLWeighting | str = "uniform",
    kl_warmup_fraction: float | None = None,
    num_draws: int = 1000,
    seed: int = 0,
    progress: bool = True,
) -> Posterior:
    r"""Fit ``guide`` to ``model`` by SVI with Adam and return draws from the fitted guide.

    Parameters
    ----------
    guide : str, GuideFactory, AutoGuide class or callable
        See :func:`guides.registry.build_guide`.
    guide_options : dict, optional
        Options for a guide given by name or factory.
    steps, epochs : int, optional
        Length of the run, in optimiser steps or in passes over the data (default 2000 steps).
    batch_size : int, optional
        Minibatch size (default: the full data).
    lr, lr_schedule, final_lr_fraction
        Adam's base rate and its :class:`~inference.schedules.LRSchedule`.
    num_particles : int
        Draws per ELBO estimate, vectorised.
    jit : bool
        Use ``JitTrace_ELBO`` (faster per step, compiles on the first step).
    kl_weighting : KLWeighting or str
        The KL's weight :math:`\pi_i` in minibatch :math:`i` of :math:`M`: ``"uniform"``
        (:math:`1/M`, plain SVI), ``"blundell"`` (:math:`2^{M-i}/(2^M-1)`) or ``"warmup"``
        (annealed in linearly); step :math:`i` minimises
        :math:`M\pi_i\,\mathrm{KL} - \tfrac{N}{|B|}\log p(\mathcal{D}_i \mid W)`, see
        :mod:`inference.kl_weights`. The recorded ELBO is this weighted objective.
    kl_warmup_fraction : float, optional
        With ``"warmup"``: the fraction of the run, in (0, 1], over which the KL weight
        rises linearly to its full value (default 0.25).
    num_draws : int
        Draws from the fitted guide kept in the :class:`Posterior`.
    seed : int
        Seeds the initialisation, minibatches, ELBO draws and posterior draws.
    progress : bool
        Show a tqdm bar with the running ELBO.
    """
    n = x.shape[0]
    total_steps, batch_size, batches_per_epoch = _plan_steps(n, steps, epochs, batch_size)
    _positive_int("num_particles", num_particles)
    _positive_int("num_draws", num_draws)
    if not (isinstance(lr, (int, float)) and 0 < lr < math.inf):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if not 0 < final_lr_fraction <= 1:
        raise ValueError(f"final_lr_fraction must lie in (0, 1], got {final_lr_fraction!r}")
    schedule = get_schedule(lr_schedule)
    weighting = get_kl_weighting(kl_weighting)
    if kl_warmup_fraction is not None and weighting is not KLWeighting.WARMUP:
        raise ValueError(f"kl_warmup_fraction applies to kl_weighting='warmup' only, not {weighting.value!r}")
    warmup_fraction = 0.25 if kl_warmup_fraction is None else kl_warmup_fraction
    if isinstance(warmup_fraction, bool) or not (isinstance(warmup_fraction, (int, float)) and 0 < warmup_fraction <= 1):
        raise ValueError(f"kl_warmup_fraction must lie in (0, 1], got {kl_warmup_fraction!r}")
    warmup_steps = max(1, math.ceil(warmup_fraction * total_steps))
    scale_kl = weighting is not KLWeighting.UNIFORM
    full_batch = batch_size == n
    num_data = None if full_batch else n

    store = pyro.get_param_store()
    with seeded(seed), store.scope() as param_state:
        built_guide, guide_name = build_guide(guide, model, **(guide_options or {}))
        elbo_class = JitTrace_ELBO if jit else Trace_ELBO
        loss = elbo_class(
            num_particles=num_particles,
            vectorize_particles=num_particles > 1,
            max_plate_nesting=MAX_PLATE_NESTING,
            **({"ignore_jit_warnings": True} if jit else {}),
        )
        # a constant rate needs no scheduler: plain Adam takes the same steps without its per-step cost
        constant_lr = schedule is LRSchedule.CONSTANT
        optimiser = Adam({"lr": lr}) if constant_lr else PyroLRScheduler(
            torch.optim.lr_scheduler.LambdaLR,
            {
                "optimizer": torch.optim.Adam,
                "optim_args": {"lr": lr},
                "lr_lambda": lambda t: schedule.factor(t, total_steps, final_lr_fraction),
            },
        )
        elbo_pair = getattr(built_guide, "elbo_pair", None)
        svi_model, svi_guide = (model, built_guide) if elbo_pair is None else elbo_pair()
        if scale_kl:
            svi_model, svi_guide = kl_scaled(svi_model), kl_scaled(svi_guide)
        svi = SVI(svi_model, svi_guide, optimiser, loss)
        elbo_history: list[float] = []
        first_step_seconds = 0.0
        start = time.perf_counter()
        bar = tqdm(range(total_steps), desc=f"SVI ({guide_name})", disable=not progress, leave=False)
        permutation = torch.arange(n)
        for step in bar:
            batch = step % batches_per_epoch
            if full_batch:
                batch_x, batch_y = x, y
            else:
                if batch == 0:
                    permutation = torch.randperm(n)
                index = permutation[batch * batch_size : (batch + 1) * batch_size]
                batch_x, batch_y = x[index], y[index]
            if scale_kl:
                pi = weighting.weight(batch=batch, num_batches=batches_per_epoch, step=step, warmup_steps=warmup_steps)
                kl_scale = (torch.tensor(batches_per_epoch * pi),)
            else:
                kl_scale = ()
            elbo = -svi.step(batch_x, batch_y, *kl_scale, num_data=num_data)
            if not math.isfinite(elbo):
                raise FloatingPointError(
                    f"the ELBO became {elbo} at step {step}; lower lr (now {lr}) or the guide's init_scale"
                )
            if not constant_lr:
                optimiser.step()
            if step == 0:
                first_step_seconds = time.perf_counter() - start
            elbo_history.append(elbo)
            if step % 50 == 0 or step == total_steps - 1:
                bar.set_postfix(elbo=f"{sum(elbo_history[-50:]) / len(elbo_history[-50:]):.4g}")
        train_seconds = time.perf_counter() - start
        draws = sample_guide(built_guide, num_draws, model.latent_shapes, x, y)
        constants = getattr(built_guide, "fitted_constants", dict)()
    samples = {name: value.unsqueeze(0) for name, value in draws.items()}
    info = {
        "method": "svi",
        "guide": guide_name,
        "seed": seed,
        "train_seconds": train_seconds,
        "first_step_seconds": first_step_seconds,
        "steps": total_steps,
        "batch_size": batch_size,
        "lr": lr,
        "lr_schedule": schedule.value,
        "num_particles": num_particles,
        "jit": jit,
        "kl_weighting": weighting.value,
        **({"kl_warmup_steps": warmup_steps} if weighting is KLWeighting.WARMUP else {}),
        "final_elbo": sum(elbo_history[-50:]) / len(elbo_history[-50:]),
        "elbo": elbo_history,
    }
    extras = {"guide": built_guide, "param_state": param_state}
    return Posterior(model, samples, x, y, info, extras=extras, constants=constants)
