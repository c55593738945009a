r"""How an SVI run walks through the data: its length in steps, and the minibatch of each step.

**The regime.** Without a ``batch_size`` a step takes the full batch where the run's full-batch gradients (its
``steps``, or the default's, times its particles, over all :math:`N` rows; ``epochs`` run in the regime the default
would) are cheap by their counted operations
(:func:`~bnn.inference.core.full_batch_work.regime_rows`), else minibatches of a plain training's 128 rows, by default
for :data:`~bnn.inference.svi.options.MINIBATCH_STEPS` steps or :data:`~bnn.inference.svi.options.MINIBATCH_EPOCHS`
epochs, whichever is longer (their gradient noise slows the ELBO's climb), in place of
:data:`~bnn.inference.svi.options.DEFAULT_STEPS`: on large data each step is cheaper and an epoch several steps. The
record's ``batch_size`` says which ran.

With :math:`N` training examples and batch size :math:`|B|`, an epoch is
:math:`M = \lfloor N/|B| \rfloor` steps on equal batches of a fresh shuffle (equal sizes keep a
JIT-compiled loss valid; the :math:`N - M|B|` examples left over change with each shuffle).
Step :math:`t` takes batch :math:`i = t \bmod M` of the current epoch's shuffle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from bnn.inference.core.full_batch_work import regime_rows
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.options import DEFAULT_STEPS, JIT_MIN_STEPS, MINIBATCH_EPOCHS, MINIBATCH_STEPS, SVIOptions


def batch_rows(model, n: int, options: SVIOptions) -> int:
    """:math:`|B|`: ``options.batch_size``, else the regime's for ``model`` on ``n`` rows (module notes): decided by
    ``options.steps`` where given, else by the default's :data:`~bnn.inference.svi.options.DEFAULT_STEPS` full-batch
    steps. ``epochs`` do not decide it: a pass over the data costs the same in either regime, and counted as full-batch
    steps, a few hundred epochs of a costly fit would be as many steps of the full batch, far too few to fit."""
    if options.batch_size is not None:
        return options.batch_size
    return regime_rows(model, n, (options.steps or DEFAULT_STEPS) * options.num_particles)


@dataclass(frozen=True)
class StepPlan:
    r"""The length of an SVI run and its cut into minibatches.

    Attributes
    ----------
    total_steps : int
        :math:`T`: ``epochs`` times :math:`M` with ``epochs``, else ``steps`` (default
        :data:`~bnn.inference.svi.options.DEFAULT_STEPS` on the full batch, on minibatches the larger of
        :data:`~bnn.inference.svi.options.MINIBATCH_STEPS` and :data:`~bnn.inference.svi.options.MINIBATCH_EPOCHS`
        epochs).
    batch_size : int
        :math:`|B|` (:func:`batch_rows`).
    warmup_steps : int
        :math:`W = \max(1, \lceil f T \rceil)` for the KL warm-up fraction :math:`f`
        (:class:`~bnn.inference.svi.kl_weights.KLWeighting`).
    jit : bool
        Compile the loss: ``options.jit``, else :math:`T \ge` :data:`~bnn.inference.svi.options.JIT_MIN_STEPS` with a
        guide that compiles (:meth:`~bnn.inference.svi.options.SVIOptions.guide_compiles`).
    """

    total_steps: int
    batch_size: int
    warmup_steps: int
    jit: bool

    @classmethod
    def of(cls, model, n: int, options: SVIOptions) -> StepPlan:
        """The plan of ``options`` for ``model`` on ``n`` training examples (``model`` ``None``: the full batch
        unless ``options`` say otherwise).

        Raises
        ------
        ValueError
            For a ``batch_size`` above ``n``.
        """
        batch_size = batch_rows(model, n, options)
        if batch_size > n:
            raise ValueError(f"batch_size {batch_size} exceeds the {n} training examples")
        if options.epochs is not None:
            total_steps = options.epochs * (n // batch_size)
        elif options.steps is not None:
            total_steps = options.steps
        else:
            total_steps = DEFAULT_STEPS if batch_size == n else max(MINIBATCH_STEPS, MINIBATCH_EPOCHS * (n // batch_size))
        jit = options.jit if options.jit is not None else total_steps >= JIT_MIN_STEPS and options.guide_compiles()
        return cls(total_steps, batch_size, max(1, math.ceil(options.warmup_fraction * total_steps)), jit)


class MiniBatches:
    r"""The arguments of step :math:`t`: minibatch :math:`t \bmod M` of the epoch's shuffle and, with a
    non-uniform KL weighting, the KL scale :math:`M\pi_t`.

    The shuffle is drawn from torch's RNG at the epoch's first batch; :attr:`permutation` holds
    the current epoch's order (a checkpoint saves and restores it).

    Parameters
    ----------
    x, y : torch.Tensor
        The training data, :math:`N` examples.
    batch_size : int
        :math:`|B| \le N`; :math:`|B| = N` passes the data unshuffled, with no ``num_data``.
    weighting : KLWeighting
        The KL weight :math:`\pi` of each step.
    warmup_steps : int
        :math:`W`, for ``KLWeighting.WARMUP``.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, weighting: KLWeighting, warmup_steps: int) -> None:
        self.x, self.y, self.batch_size = x, y, batch_size
        self.weighting, self.warmup_steps = weighting, warmup_steps
        self.batches_per_epoch = x.shape[0] // batch_size
        self.permutation = torch.arange(x.shape[0])

    def __call__(self, step: int) -> tuple[tuple, dict[str, Any]]:
        """``(args, kwargs)`` of the model and guide at ``step``: ``(x_B, y_B[, kl_scale])`` and ``num_data``."""
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
