"""The options of an SVI fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from bnn.guides import GUIDES
from bnn.inference.core.device import DeviceOptions
from bnn.inference.core.temperature import UNTEMPERED, parse_temperature
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.optimiser import ADAM_BETAS
from bnn.inference.svi.schedules import LRSchedule

from bnn.options import (
    choice,
    flag,
    fraction,
    mapping,
    option,
    optional,
    path,
    positive_int,
    positive_number,
    seed,
)
from bnn.runtime.memory import parameter_count, value_bytes

DEFAULT_STEPS = 10000
JIT_MIN_STEPS = 100
"""The shortest run that ``jit`` left unset compiles: compiling takes about as long as this many steps save
(benchmarks/results/svi_jit.md)."""
MINIBATCH_STEPS, MINIBATCH_EPOCHS = 20000, 100
"""The default length where the regime of :mod:`bnn.inference.svi.minibatches` takes minibatches: the fewest steps that
give this many steps and this many passes over the data (their gradient noise slows the ELBO's climb; on MNIST-1D-40k
20,000 steps are 64 passes, and SVI's check failed there). Chosen on the built-in data so that SVI's own check passes
there: benchmarks/results/training_cost.md runs the defaults."""
DEFAULT_KL_WARMUP_FRACTION = 0.25


@dataclass(frozen=True)
class SVIOptions(DeviceOptions):
    r"""Options of :func:`~bnn.inference.svi.fit_svi`.

    Attributes
    ----------
    guide : str, GuideFactory, AutoGuide class or callable
        See :func:`bnn.guides.registry.build_guide` (default ``"meanfield"``, with local reparameterisation
        wherever the priors allow it: :class:`~bnn.guides.meanfield.MeanFieldGuide`; ``"autonormal"`` for a network
        with hierarchical priors, whose latent scales only it covers).
    guide_options : dict, optional
        Options for a guide given by name or factory. ``init_loc="map"`` starts the guide at the
        MAP weights of the full training data (:mod:`bnn.inference.svi.guide`).
    steps, epochs : int, optional
        Length of the run, in optimiser steps or in passes over the data (default 10,000 steps on the full batch; on
        minibatches the fewest steps that give :data:`MINIBATCH_STEPS` steps and :data:`MINIBATCH_EPOCHS` passes).
    batch_size : int, optional
        Minibatch size (default: the full data where its work is cheap, else 128 rows: the regime of
        :mod:`bnn.inference.svi.minibatches`).
    lr, lr_schedule, final_lr_fraction
        Adam's base rate and its :class:`~bnn.inference.svi.schedules.LRSchedule` (default 0.01, cosine down to
        1% of it). The defaults (guide, steps, schedule) reach the highest ELBO within 10,000 steps (chosen on
        toy1d: ``benchmarks/results/svi_defaults.md``).
    num_particles : int
        Draws per ELBO estimate, vectorised.
    jit : bool, optional
        Use ``JitTrace_ELBO``: faster per step, after compiling the loss on the first step (default: for runs of
        :data:`JIT_MIN_STEPS` steps or more, which repay the compilation, with a guide JIT can run: the plan's
        :attr:`~bnn.inference.svi.minibatches.StepPlan.jit`).
    kl_weighting : KLWeighting or str
        The KL's weight :math:`\pi_i` in minibatch :math:`i` of :math:`M`: ``"uniform"``
        (:math:`1/M`, plain SVI), ``"blundell"`` (:math:`2^{M-i}/(2^M-1)`) or ``"warmup"``
        (annealed in linearly); step :math:`i` minimises
        :math:`M\pi_i\,\mathrm{KL} - \tfrac{N}{|B|}\log p(\mathcal{D}_i \mid W)`, see
        :mod:`bnn.inference.svi.kl_weights`. The recorded ELBO is this weighted objective.
    kl_warmup_fraction : float, optional
        With ``"warmup"``: the fraction of the run, in (0, 1], over which the KL weight
        rises linearly to its full value (default 0.25).
    temperature : float
        The likelihood temperature :math:`T`, 1 (Bayes' posterior) by default. The ELBO weighs the log-likelihood by
        :math:`1/T`, :mod:`bnn.inference.core.temperature`.
    num_samples : int
        Draws from the fitted guide kept in the :class:`~bnn.inference.core.posterior.Posterior`.
    seed : int
        Seeds the initialisation, minibatches, ELBO draws and posterior draws.
    progress : bool
        Show a tqdm bar with the running ELBO.
    checkpoint_dir : str or Path, optional
        Folder for checkpoints (:mod:`bnn.inference.svi.checkpoint`), written every ``checkpoint_every``
        steps, at the end, and on Ctrl-C or SIGTERM, which then end the fit after the current step
        (``KeyboardInterrupt``, naming the signal and the folder); must not hold another
        fit's checkpoint.
    checkpoint_every : int, optional
        Steps between checkpoints (default 1000 when there is a checkpoint folder).
    resume : str or Path, optional
        A checkpoint folder to continue from; the fit must have the same model, guide, data,
        ``seed`` and trajectory options, and ends with the numbers of a run never stopped.
        Checkpoints go on being written there unless ``checkpoint_dir`` names another folder.
    """

    guide: Any = option("meanfield", choices=GUIDES.names)
    guide_options: dict[str, Any] = option(None, mapping)
    steps: int | None = option(None, optional(positive_int))
    epochs: int | None = option(None, optional(positive_int))
    batch_size: int | None = option(None, optional(positive_int))
    lr: float = option(0.01, positive_number)
    lr_schedule: LRSchedule = option("cosine", choice(LRSchedule))
    final_lr_fraction: float = option(0.01, fraction)
    num_particles: int = option(1, positive_int)
    jit: bool | None = option(None, optional(flag))
    kl_weighting: KLWeighting = option("uniform", choice(KLWeighting))
    kl_warmup_fraction: float | None = option(None, optional(fraction))
    temperature: float = option(UNTEMPERED, parse_temperature)
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)
    checkpoint_dir: Path | None = option(None, optional(path))
    checkpoint_every: int | None = option(None, optional(positive_int))
    resume: Path | None = option(None, optional(path))

    def check(self) -> None:
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give steps or epochs, not both")
        if self.jit and not self.guide_compiles():
            raise ValueError(f"guide {self.guide!r} runs without JIT (Pyro's compiled ELBO can fail on its parameters): "
                             "leave jit unset, or jit=False")
        if self.kl_warmup_fraction is not None and self.kl_weighting is not KLWeighting.WARMUP:
            raise ValueError(f"kl_warmup_fraction applies to kl_weighting='warmup' only, not {self.kl_weighting.value!r}")
        if self.checkpoint_every is not None and self.checkpoint_dir is None and self.resume is None:
            raise ValueError("checkpoint_every needs checkpoint_dir (or resume) to say where checkpoints go")
        check_lr(self.lr)

    @property
    def warmup_fraction(self) -> float:
        """The KL warm-up fraction in force (its default where none was given)."""
        return DEFAULT_KL_WARMUP_FRACTION if self.kl_warmup_fraction is None else self.kl_warmup_fraction

    def guide_compiles(self) -> bool:
        """Whether ``JitTrace_ELBO`` can run the guide (a guide by name says so; any other is assumed to)."""
        return not isinstance(self.guide, str) or GUIDES.get(self.guide).compiles

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        covariance = ({"the full covariance's Cholesky factor, its gradients and Adam's moments (4 D^2)":
                       value_bytes(4 * parameters**2)} if self.guide == "full" else {})
        return {**covariance, "guide, its gradients and Adam's moments (8 D)": value_bytes(8 * parameters),
                f"{self.num_particles} particle draws": value_bytes(self.num_particles * parameters),
                f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)}


def check_lr(lr: float) -> None:
    r"""Refuse an ``lr`` so large that Adam cannot take its first step.

    Adam's step :math:`t` moves a weight by :math:`\frac{\mathrm{lr}}{1-\beta_1^t}\,\hat m_t/(\sqrt{\hat v_t}+\epsilon)`;
    torch turns the factor :math:`\mathrm{lr}/(1-\beta_1^t)`, largest at :math:`t = 1`, into the parameters'
    dtype, so it must not exceed that dtype's largest number (about 3.4e37 for ``lr`` in float32). A schedule
    only lowers the rate.
    """
    dtype = torch.get_default_dtype()
    bound = torch.finfo(dtype).max * (1 - ADAM_BETAS[0])
    if lr > bound:
        raise ValueError(f"lr {lr!r} is above {bound:.4g}, the largest rate whose first Adam step, lr / (1 - beta1), "
                         f"is a finite {dtype}; use a far smaller lr (such as 0.01)")
