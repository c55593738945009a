"""The options of an MC dropout fit, validated when they are built."""

from __future__ import annotations

from dataclasses import dataclass

from bnn.options import Options, flag, integer, option, optional, positive_int, positive_number, probability, seed
from bnn.runtime.memory import parameter_count, value_bytes


@dataclass(frozen=True)
class MCDropoutOptions(Options):
    r"""Options of :func:`~bnn.inference.mc_dropout.fit_mc_dropout`.

    Attributes
    ----------
    dropout_rate : float
        :math:`p`, the probability that an input of a layer is dropped, in (0, 1).
    steps : int
        Adam steps (one minibatch each).
    lr : float
        Adam's learning rate.
    batch_size : int, optional
        Examples per step (default: all, full-batch steps); each gets its own dropout masks.
    num_samples : int
        Draws of the weights (one set of masks each) kept in the :class:`~bnn.inference.core.posterior.Posterior`.
    seed : int
        Seeds the initial weights (a prior draw), the minibatches, the training masks and the draws.
    progress : bool
        Show a tqdm bar.
    """

    dropout_rate: float = option(0.01, probability)
    steps: int = option(3000, positive_int)
    lr: float = option(0.01, positive_number)
    batch_size: int | None = option(None, optional(integer(minimum=1)))
    num_samples: int = option(1000, positive_int)
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        return {"Adam's state (4 D)": value_bytes(4 * parameters),
                f"{self.num_samples} posterior draws": value_bytes(self.num_samples * parameters)}
