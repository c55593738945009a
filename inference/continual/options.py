"""The options of a continual-learning run, validated when they are built."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bnn.options import Options, number, option, optional, positive_int, positive_number, seed


def _widths(option_name: str, value) -> tuple[int, ...]:
    widths = tuple(value) if isinstance(value, (list, tuple)) else None
    if not widths or any(isinstance(w, bool) or not isinstance(w, int) or w < 1 for w in widths):
        raise ValueError(f"{option_name} must be a non-empty sequence of positive integers (the shared hidden widths), "
                         f"got {value!r}")
    return widths


@dataclass(frozen=True)
class ContinualOptions(Options):
    """Options of :func:`~bnn.inference.continual.run_continual`, the same for every method of a run.

    Attributes
    ----------
    hidden : tuple of int
        Widths of the hidden layers (shared by the heads of a multi-head benchmark).
    prior_scale : float
        :math:`s` of the first task's prior :math:`\\mathcal{N}(0, s^2)` on every weight, and of every new head's.
    steps : int
        Adam steps per fit: each SVI fit (VCL), each MAP fit (fine-tuning, joint training, the Laplace MAP).
    lr : float
        Adam's rate for every fit.
    init_rho : float
        Initial :math:`\\rho` of the mean-field guide, :math:`\\sigma = \\operatorname{softplus}(\\rho)`; its means start
        at the previous task's posterior means (at small draws for the first task). The guide starts no wider than
        the first prior: :math:`\\operatorname{softplus}(\\rho) \\le s`.
    num_samples : int
        Posterior draws kept for prediction.
    coreset_size : int
        Examples of each task kept in the coreset (``vcl-coreset``), chosen at random.
    std_init : float, optional
        ``bgd``: the scale :math:`\\sigma` of every weight on the first task (its :math:`q_0`, the prior); by
        default from the likelihood (:func:`~bnn.inference.continual.bgd.first_scale`).
    mean_eta : float
        ``bgd``: :math:`\\eta`, the factor of the means' update (1 in the theory), below ``2 * steps``: a mean's update,
        :math:`\\eta\\sigma^2` times its gradient, is stable on a quadratic loss of curvature :math:`a` only while
        :math:`\\eta\\sigma^2 a < 2`, and :math:`\\sigma^2 a` falls as :math:`1/k` after :math:`k` updates, so with a
        larger :math:`\\eta` no update of a task is stable.
    mc_samples : int
        ``bgd``: draws per update for its two expectations, in antithetic pairs (an even number).
    batch_size : int
        ``bgd``: rows per update (``steps`` updates per task).
    seed : int
        Seeds every fit and the coreset choice (task ``t`` uses ``seed + t``).
    """

    hidden: tuple[int, ...] = option((100,), _widths)
    prior_scale: float = option(1.0, positive_number)
    steps: int = option(1500, positive_int)
    lr: float = option(0.01, positive_number)
    init_rho: float = option(-5.0, number())
    num_samples: int = option(100, positive_int)
    coreset_size: int = option(40, positive_int)
    std_init: float | None = option(None, optional(positive_number))
    mean_eta: float = option(1.0, positive_number)
    mc_samples: int = option(10, positive_int)
    batch_size: int = option(32, positive_int)
    seed: int = option(0, seed)

    def check(self) -> None:
        if self.mc_samples % 2:
            raise ValueError(f"mc_samples={self.mc_samples} must be even: bgd draws its noise in antithetic pairs "
                             f"(eps, -eps); pass {self.mc_samples + 1}")
        if self.mean_eta >= 2 * self.steps:
            raise ValueError(f"mean_eta={self.mean_eta:g} cannot settle within a task of steps={self.steps} updates: bgd "
                             "moves a mean by mean_eta sigma^2 times its gradient, which on a quadratic loss of "
                             "curvature a is stable only while mean_eta sigma^2 a < 2, and sigma^2 a falls as 1 / k after "
                             f"k updates; pass a mean_eta below 2 x steps = {2 * self.steps} (1 in the theory)")
        start = math.log1p(math.exp(self.init_rho)) if self.init_rho < 30 else self.init_rho  # softplus
        if start > self.prior_scale:
            raise ValueError(f"init_rho={self.init_rho:g} starts the guide at sd softplus(init_rho) = {start:.3g}, wider "
                             f"than the prior's scale {self.prior_scale:g}; pass an init_rho below "
                             f"{math.log(math.expm1(self.prior_scale)):.3g} (the default -5 starts at sd 0.0067)")
