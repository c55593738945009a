r"""The options of SWAG and MultiSWAG, validated when they are built."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from bnn.inference.ensemble.options import MemberOptions

from bnn.options import flag, integer, number, option, optional, positive_number, seed
from bnn.runtime.memory import parameter_count, value_bytes


@dataclass(frozen=True)
class SWAGOptions(MemberOptions):
    r"""Options of :func:`~bnn.inference.swag.fit_swag`: the members' MAP fits'
    (:class:`~bnn.inference.ensemble.options.MemberOptions`) and

    Attributes
    ----------
    swag_lr : float, optional
        :math:`\eta`, SGD's constant rate on the mean log joint per data point,
        :math:`\theta \leftarrow \theta + \eta\,\widehat{\nabla}\log p(\theta \mid \mathcal{D}) / N`, the same for
        every member. ``None`` (the default) sets each member's from the curvature at its MAP:
        :math:`\eta / N = s / \lambda_{max}`, with :math:`\lambda_{max}` the largest eigenvalue of the Hessian of the
        negative log joint there (:mod:`bnn.inference.sgmcmc.curvature`) and :math:`s` = ``step_share``, so the
        step is stable (:math:`s < 2`) on any data size and noise level.
    step_share : float
        :math:`s`, the step times :math:`\lambda_{max}` when ``swag_lr`` is ``None``; ignored otherwise. The default,
        0.5, was chosen against 1 and 1.9 on the built-in data and five UCI sets so that the Gaussian passes its width
        check (:mod:`bnn.inference.swag.effective_parameters`) on every one (benchmarks/results/swag_rate/width/results.md):
        near the largest stable step, 2, the iterates' spread grows as :math:`s / (2 - s)`.
    swag_epochs : int
        Epochs of SGD after the MAP; one iterate is collected at the end of each (>= ``rank``).
    rank : int
        :math:`K`, the deviations kept for the low-rank part of the covariance (>= 2).
    batch_size : int, optional
        :math:`B`, data points per SGD step: fewer than the data (full batches do not move from the MAP). ``None``
        (the default): :math:`\max(32, \lceil N / 32 \rceil)` for :math:`N` rows (:meth:`batch_rows`).
    num_samples : int
        Draws from each member's Gaussian.
    num_members : int
        Independent SWAGs, each from its own MAP (MultiSWAG, Wilson and Izmailov 2020, for more than one): their MAP
        fits run as the deep ensemble's (``member_method``), their SGD side by side in this process.
    seed : int
        Seeds the MAP starts, the minibatches and the draws: the same seed gives the same draws.
    progress : bool
        Show tqdm bars.
    """

    swag_lr: float | None = option(None, optional(positive_number))
    step_share: float = option(0.5, number(low=0.0, high=2.0, low_open=True, high_open=True))
    swag_epochs: int = option(100, integer(minimum=2))
    rank: int = option(20, integer(minimum=2))
    batch_size: int | None = option(None, optional(integer(minimum=1)))
    num_samples: int = option(100, integer(minimum=1))
    num_members: int = option(1, integer(minimum=1))
    seed: int = option(0, seed)
    progress: bool = option(True, flag)

    def check(self) -> None:
        if self.swag_epochs < self.rank:
            raise ValueError(f"swag_epochs={self.swag_epochs} collects {self.swag_epochs} iterates, fewer than the "
                             f"rank={self.rank} deviations the covariance keeps: raise swag_epochs or lower rank")

    def batch_rows(self, rows: int) -> int:
        r"""The batch for ``rows`` training rows: ``batch_size``, or :math:`B = \max(32, \lceil N / 32 \rceil)`.

        Near a mode, SGD at step :math:`\epsilon` on a direction of curvature :math:`\lambda` of the negative log
        joint, whose minibatch gradient has variance :math:`N\lambda / B` there (the gradient noise of one data point
        taken as its Fisher information, Mandt et al. 2017), settles to the variance
        :math:`\epsilon N / (B (2 - \epsilon\lambda))` from the recursion
        :math:`u \leftarrow (1 - \epsilon\lambda) u + \epsilon\xi`. Against the posterior's :math:`1/\lambda`, along
        the stiffest direction at the curvature-set step :math:`\epsilon = s / \lambda_{max}`:

        .. math::

            \frac{\operatorname{Var}_{SGD}}{\operatorname{Var}_{post}} = \frac{s}{2 - s}\,\frac{N}{B},

        which grows with the data at a fixed batch. The default keeps :math:`N / B \le 32`, the ratio of a
        data set of 1,024 rows at a batch of 32, on larger data sets too.
        """
        if self.batch_size is not None:
            return self.batch_size
        return max(32, math.ceil(rows / 32))

    def memory_needs(self, model) -> dict[str, int]:
        parameters = parameter_count(model)
        return {**self.member_fit_needs(model),
                f"{self.num_members} x {self.rank} deviations (float64)": value_bytes(
                    self.num_members * self.rank * parameters, torch.float64),
                f"{self.num_members} x {self.num_samples} draws": value_bytes(
                    self.num_members * self.num_samples * parameters)}


@dataclass(frozen=True)
class MultiSWAGOptions(SWAGOptions):
    """Options of :func:`~bnn.inference.swag.fit_multiswag`: those of :class:`SWAGOptions`, 5 members by default."""

    num_members: int = option(5, integer(minimum=1))
