"""The options of an IVON fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass

from bnn.inference.core.device import DeviceOptions
from bnn.inference.core.training_length import default_epochs, steps_per_epoch

from bnn.options import flag, integer, option, optional, positive_int, positive_number, probability, seed
from bnn.runtime.memory import parameter_count, value_bytes

BATCH_SIZE = 128
"""The default examples per step (chosen on the built-in data: benchmarks/results/training_cost.md)."""
MIN_STEPS = 9000
"""The default training's fewest steps, three times MC dropout's: on MNIST-1D's 4,000 rows IVON's objective is still
rising after 3,000 steps, and its own check fails (chosen on the built-in data: benchmarks/results/training_cost.md)."""


@dataclass(frozen=True)
class IVONOptions(DeviceOptions):
    r"""Options of :func:`~bnn.inference.ivon.fit_ivon` (Shen et al. 2024, ``ivon-opt``'s ``IVON`` optimiser).

    Attributes
    ----------
    lr : float
        The peak learning rate :math:`\alpha`, decayed to zero along a cosine over the run (as in the paper); IVON
        scales it by :math:`h_0 + \delta` (``rescale_lr``), so it is of the order of SGD's rate, not Adam's.
    hess_init : float
        :math:`h_0`, the start of the per-weight Hessian estimate: the posterior's first standard deviation is
        :math:`1/\sqrt{N (h_0 + \delta)}`.
    beta1 : float
        The momentum of the gradient, in (0, 1).
    beta2 : float
        The decay of the Hessian's running estimate, in (0, 1): its memory is about :math:`1/(1 - \beta_2)` steps, so
        that it should be well below the run's steps.
    mc_samples : int
        Weight draws per step, their gradients averaged.
    epochs : int, optional
        Passes over the :math:`N` training rows, :math:`\lceil N / B \rceil` steps each (default:
        :func:`~bnn.inference.core.training_length.default_epochs`, the fewest that give 50 passes and
        :data:`MIN_STEPS` steps).
    batch_size : int, optional
        :math:`B`, examples per step (default 128; ``None``: all, full-batch steps).
    clip_radius : float, optional
        IVON's clipping of each step's update (``None``: none).
    num_samples : int
        Draws of the weights from the fitted Gaussian kept in the :class:`~bnn.inference.core.posterior.Posterior`.
    seed : int
        Seeds the minibatches and every weight draw.
    progress : bool
        Show a tqdm bar.
    """

    lr: float = option(0.3, positive_number)
    hess_init: float = option(1.0, positive_number)
    beta1: float = option(0.9, probability)
    beta2: float = option(0.9999, probability)
    mc_samples: int = option(1, positive_int)
    epochs: int | None = option(None, optional(integer(minimum=1)))
    batch_size: int | None = option(BATCH_SIZE, optional(integer(minimum=1)))
    clip_radius: float | None = option(None, optional(positive_number))
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def batch_rows(self, rows: int) -> int:
        """Examples per step on ``rows`` training rows (all of them for full-batch steps)."""
        return rows if self.batch_size is None else min(self.batch_size, rows)

    def training_epochs(self, rows: int) -> int:
        """The passes over ``rows`` training rows: ``epochs``, or the default (attribute notes)."""
        return self.epochs if self.epochs is not None else default_epochs(rows, self.batch_rows(rows), MIN_STEPS)

    def training_steps(self, rows: int) -> int:
        """IVON's steps on ``rows`` training rows."""
        return self.training_epochs(rows) * steps_per_epoch(rows, self.batch_rows(rows))

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        return {"IVON's state (mean, momentum, Hessian, a draw, gradient averages: 6 D)": value_bytes(6 * parameters),
                f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)}
