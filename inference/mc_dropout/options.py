"""The options of an MC dropout fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bnn.inference.core.device import DeviceOptions
from bnn.inference.core.training_length import default_epochs, steps_per_epoch

from bnn.options import (
    choice,
    flag,
    integer,
    option,
    optional,
    positive_int,
    positive_number,
    probability,
    seed,
)
from bnn.runtime.memory import parameter_count, value_bytes

BATCH_SIZE = 128
"""The default examples per step: the paper's code's (Gal and Ghahramani 2016), and the plain training's of the cost
benchmark (benchmarks/results/training_cost.md); a full-batch step costs the same step over every row."""
MAX_LENGTHS = 4
"""The most default lengths a training with neither ``steps`` nor ``epochs`` given runs while its objective is still
gaining (:mod:`bnn.inference.mc_dropout.record`)."""


class DropoutInit(str, Enum):
    """Where the trained weights start: a draw from the prior, or Keras's default initialisation (Glorot-uniform
    weights, zero biases), which the paper's code used."""

    PRIOR = "prior"
    GLOROT = "glorot"


@dataclass(frozen=True)
class MCDropoutOptions(DeviceOptions):
    r"""Options of :func:`~bnn.inference.mc_dropout.fit_mc_dropout`.

    Attributes
    ----------
    dropout_rate : float
        :math:`p`, the probability that an input of a layer is dropped, in (0, 1).
    steps : int, optional
        Adam steps (one minibatch each).
    epochs : int, optional
        The length of the training in passes over the :math:`N` training rows instead, :math:`\lceil N / B \rceil`
        steps each (the last minibatch of an epoch holds the rest; the unit of the paper's code). With neither
        given, :func:`~bnn.inference.core.training_length.default_epochs`: the fewest passes that give 50 passes and
        3,000 steps (a time budget lowers ``steps`` only), and then as many again while the objective is still gaining
        (the fit's own check, :mod:`~bnn.inference.mc_dropout.record`), :data:`MAX_LENGTHS` lengths at most.
    lr : float
        Adam's learning rate.
    batch_size : int, optional
        Examples per step (default :data:`BATCH_SIZE`, the paper's; ``None``: all, full-batch steps); each gets its
        own dropout masks.
    weight_init : {"prior", "glorot"}
        The trained weights' start: a prior draw, or Glorot-uniform weights
        :math:`\mathcal{U}(\pm\sqrt{6 / (\text{fan\_in} + \text{fan\_out})})` with one-dimensional sites (biases) at
        zero (``torch.nn.init.xavier_uniform_``, Keras's default). A wide prior (the paper's length scale) needs the
        second: a draw from it starts the network far from any fit.
    num_samples : int
        Draws of the weights (one set of masks each) kept in the :class:`~bnn.inference.core.posterior.Posterior`.
    seed : int
        Seeds the initial weights, the minibatches, the training masks and the draws.
    progress : bool
        Show a tqdm bar.
    """

    dropout_rate: float = option(0.01, probability)
    steps: int | None = option(None, optional(positive_int))
    lr: float = option(0.01, positive_number)
    batch_size: int | None = option(BATCH_SIZE, optional(integer(minimum=1)))
    epochs: int | None = option(None, optional(integer(minimum=1)))
    weight_init: DropoutInit = option("prior", choice(DropoutInit))
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def check(self) -> None:
        if self.steps is not None and self.epochs is not None:
            raise ValueError("give steps or epochs, not both")

    @property
    def trains_on(self) -> bool:
        """Whether the training may run on past its length while it still gains: neither ``steps`` nor ``epochs``
        given."""
        return self.steps is None and self.epochs is None

    def batch_rows(self, rows: int) -> int:
        """Examples per step on ``rows`` training rows (all of them for full-batch steps)."""
        return rows if self.batch_size is None else min(self.batch_size, rows)

    def training_steps(self, rows: int) -> int:
        """The Adam steps of one length on ``rows`` training rows: ``steps``, ``epochs`` passes, or the default
        passes."""
        if self.steps is not None:
            return self.steps
        batch = self.batch_rows(rows)
        return steps_per_epoch(rows, batch) * (self.epochs if self.epochs is not None else default_epochs(rows, batch))

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        return {"Adam's state (4 D)": value_bytes(4 * parameters),
                f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)}
