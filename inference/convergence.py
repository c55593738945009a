r"""Convergence of MCMC chains in function space: the R-hat of the network's output.

The weights of a network are not identifiable: permuting the hidden units of a layer (and
flipping the signs of an odd activation's units) gives the same function, so chains that
settle in different permutations disagree on every weight (split :math:`\hat{R} \gg 1.01`)
while they agree on everything the model predicts. The check that matters is the R-hat of
the predictive mean :math:`f(x_i; W)` over the chains,

.. math::

    \hat{R}_{\text{pred}} = \max_i \hat{R}\big(\{f(x_i; W_{c,d})\}_{c,d}\big),

ArviZ's rank-normalised split :math:`\hat{R}` of each output at each input :math:`x_i`, the
maximum over inputs and outputs (at most ``MAX_POINTS`` inputs, evenly spaced, so that the
cost stays bounded on large data sets) and over the likelihood's latents (the noise scale
:math:`\sigma`, identifiable): together they fix the predictive distribution
:math:`p(y \mid x, W, \sigma)`.

The verdict: a run *converged* when no draw diverged and, with several chains,
:math:`\hat{R}_{\text{pred}} \le 1.01`. The largest :math:`\hat{R}` over the weights is reported
but does not decide: it exceeds 1.01 whenever chains settle in different permutations of the
same function, which is no fault of the sampler (with one chain, only divergences decide).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import arviz as az
import numpy as np
import torch
from bnn.inference.record import FitRecord

MAX_POINTS = 500
R_HAT_THRESHOLD = 1.01


def weight_diagnostics(samples: Mapping[str, np.ndarray], diverging: np.ndarray) -> dict[str, Any]:
    """Max split R-hat (``None`` for one chain), min bulk and tail ESS over all scalar
    parameters, and the number of divergent draws; draws are ``(chains, draws, ...)``."""
    dataset = az.convert_to_dataset(dict(samples))
    num_chains = diverging.shape[0]

    def extreme(values: Any, pick: Callable) -> float:
        return float(pick([pick(array.values) for array in values.data_vars.values()]))  # NaN propagates

    with np.errstate(invalid="ignore", divide="ignore"):  # constant draws give NaN, judged below
        return {
            "r_hat_max": extreme(az.rhat(dataset), np.max) if num_chains > 1 else None,
            "ess_bulk_min": extreme(az.ess(dataset, method="bulk"), np.min),
            "ess_tail_min": extreme(az.ess(dataset, method="tail"), np.min),
            "divergences": int(diverging.sum()),
        }


def chain_diagnostics(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor, diverging: np.ndarray) -> ChainDiagnostics:
    r"""The :class:`ChainDiagnostics` of draws ``samples[site]`` ``(chains, draws, *site_shape)`` of ``model`` fitted on
    inputs ``x``, with ``diverging`` ``(chains, draws)``: converged when no draw diverged and, with several chains,
    :math:`\hat{R}_{\text{pred}} \le 1.01` (a NaN fails); the weights' :math:`\max\hat{R}` is reported, not judged."""
    found = weight_diagnostics({name: torch.as_tensor(value).numpy() for name, value in samples.items()}, diverging)
    r_hat_predictive = predictive_r_hat(model, samples, x) if diverging.shape[0] > 1 else None
    converged = found["divergences"] == 0 and (r_hat_predictive is None or r_hat_predictive <= R_HAT_THRESHOLD)
    return ChainDiagnostics(**found, r_hat_predictive=r_hat_predictive, converged=converged)


def r_hat_over_points(f: np.ndarray) -> float:
    r"""The largest :math:`\hat{R}` over the trailing axes of ``f``, of shape ``(chains, draws, *points)`` (chains >= 2);
    NaN when some point's draws are constant."""
    if f.ndim < 2 or f.shape[0] < 2:
        raise ValueError(f"R-hat needs draws of shape (chains >= 2, draws, ...), got {f.shape}; run two or more chains")
    with np.errstate(invalid="ignore", divide="ignore"):
        r_hat = az.rhat(az.convert_to_dataset({"f": f.reshape(*f.shape[:2], -1)}))["f"].values
    return float(np.max(r_hat))  # a NaN propagates


def predictive_r_hat(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor) -> float:
    r""":math:`\hat{R}_{\text{pred}}` of ``model`` at the inputs ``x`` (``(n, in_features)``; at most ``MAX_POINTS``
    of them, evenly spaced, are used) and over its likelihood's latents, for draws ``samples[site]`` of shape
    ``(chains, draws, *site_shape)``."""
    chains, draws = next(iter(samples.values())).shape[:2]
    index = torch.linspace(0, x.shape[0] - 1, min(x.shape[0], MAX_POINTS)).round().long()
    values = {name: torch.as_tensor(value).reshape(chains * draws, *value.shape[2:]) for name, value in samples.items()}
    with torch.no_grad():
        f = model.forward(x[index], values)  # (chains * draws, points, out)
    latents = [value.reshape(chains * draws, -1) for value in model.likelihood_latents(values).values()]
    predictive = torch.cat([f.reshape(chains * draws, -1), *latents], dim=1).to(torch.float64)
    return r_hat_over_points(predictive.reshape(chains, draws, -1).numpy())


@dataclass(kw_only=True)
class ChainDiagnostics:
    r"""The convergence checks of a run of Markov chains, over its draws ``(chains, draws, ...)``.

    Attributes
    ----------
    r_hat_max : float or None
        The largest rank-normalised split :math:`\hat{R}` over every scalar parameter (``None`` for one chain).
    r_hat_predictive : float or None
        :math:`\hat{R}_{\text{pred}}` of the network output at the training inputs and of the likelihood's latents
        (``None`` for one chain).
    ess_bulk_min, ess_tail_min : float
        The smallest bulk and tail effective sample sizes over every scalar parameter.
    divergences : int
        Divergent transitions among the draws kept.
    converged : bool
        No divergence and :math:`\hat{R}_{\text{pred}} \le 1.01` (with several chains).
    """

    r_hat_max: float | None
    r_hat_predictive: float | None
    ess_bulk_min: float
    ess_tail_min: float
    divergences: int
    converged: bool

    @property
    def chains_agree(self) -> bool | None:
        """Whether the chains agree on the predictions (:math:`\\hat{R}_{\\text{pred}} \\le 1.01`); ``None`` for one chain."""
        return None if self.r_hat_predictive is None else bool(self.r_hat_predictive <= R_HAT_THRESHOLD)


class ConvergenceWarning(UserWarning):
    """A Markov-chain run (NUTS, SG-MCMC) shows divergences or chains that disagree (R-hat above 1.01)."""


class IncompleteSamplingWarning(UserWarning):
    """A Markov-chain run returns fewer draws than asked: a chain failed, or the run was interrupted."""


@dataclass(kw_only=True)
class ChainRecord(FitRecord):
    """What every Markov-chain method records beyond its options: its convergence checks and whether it was cut short.

    Attributes
    ----------
    diagnostics : ChainDiagnostics
        R-hat (weights and predictive), ESS, divergences and the verdict.
    incomplete : bool
        The run was interrupted (Ctrl-C, SIGTERM) and holds fewer draws than asked; ``incomplete_reason`` says what.
    """

    method: ClassVar[str] = ""
    diagnostics: ChainDiagnostics
    incomplete: bool = False
    incomplete_reason: str | None = None

    @property
    def converged(self) -> bool:
        """The chains' own verdict (:attr:`ChainDiagnostics.converged`)."""
        return self.diagnostics.converged

    @property
    def interrupted(self) -> str | None:
        return self.incomplete_reason if self.incomplete else None

    def problems(self) -> list[str]:
        return [f"{self.method} was interrupted: {self.incomplete_reason}"] if self.incomplete else []

    def metrics(self) -> dict[str, Any]:
        faults = {"incomplete": True, "incomplete_reason": self.incomplete_reason} if self.incomplete else {}
        return {**vars(self.diagnostics), **faults}
