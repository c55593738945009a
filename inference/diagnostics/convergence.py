r"""Convergence of MCMC chains in function space: the R-hat of the network's output.

The weights of a network are not identifiable: permuting the hidden units of a layer (and
flipping the signs of an odd activation's units) gives the same function, so chains that
settle in different permutations disagree on every weight (split :math:`\hat{R} \gg 1.01`)
while they agree on everything the model predicts. The check that matters is the R-hat of
the predictive mean :math:`f(x_i; W)` over the chains,

.. math::

    \hat{R}_{\text{pred}} = \max_i \hat{R}\big(\{f(x_i; W_{c,d})\}_{c,d}\big),

ArviZ's rank-normalised split :math:`\hat{R}` (:mod:`~bnn.inference.diagnostics.rank_diagnostics`) of each output
at each input :math:`x_i`, the
maximum over inputs and outputs (at most ``MAX_POINTS`` inputs, evenly spaced, so that the
cost stays bounded on large data sets) and over the likelihood's latents (the noise scale
:math:`\sigma`, identifiable): together they fix the predictive distribution
:math:`p(y \mid x, W, \sigma)`.

The verdict: a run *converged* when

- at least two chains ran to the end and no chain failed: one chain cannot show that it found the whole posterior
  (R-hat compares chains), and a failed chain is a start the sampler could not leave;
- no draw diverged;
- :math:`\hat{R}_{\text{pred}} \le 1.01`, a NaN failing (ArviZ's :math:`\hat{R}` is the larger of a bulk part, which
  compares where the split chains lie, and a tail part, which compares how far they spread; the record keeps the bulk
  part too, ``r_hat_predictive_bulk``, so that a run whose chains agree on the location of the predictions but not yet
  on their spread, which rarer excursions set, is told to draw more rather than to start elsewhere);
- the smallest bulk effective sample size of the same predictive quantities is at least
  ``MIN_ESS_PER_CHAIN`` (100) per chain: Vehtari et al. (2021, "Rank-normalization, folding, and localization: an
  improved R-hat for assessing convergence of MCMC", Bayesian Analysis 16(2)) ask for a bulk ESS above 400 with their
  four default chains, 100 per chain, before R-hat and the posterior's summaries can be trusted.

The largest :math:`\hat{R}` over the weights, and their ESS, are reported but do not decide: they are poor whenever
chains settle in different permutations of the same function, which is no fault of the sampler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from bnn.inference.diagnostics.rank_diagnostics import ess_bulk, ess_tail, split_r_hat, split_r_hat_parts
from bnn.models.draw_batches import draw_batches

MAX_POINTS = 500
R_HAT_THRESHOLD = 1.01
MIN_ESS_PER_CHAIN = 100
"""The smallest bulk ESS per chain, over the predictive quantities, of a converged run."""


def weight_diagnostics(samples: Mapping[str, np.ndarray], diverging: np.ndarray) -> dict[str, Any]:
    """Max split R-hat (``None`` for one chain), min bulk and tail ESS over all scalar
    parameters, and the number of divergent draws; draws are ``(chains, draws, ...)``."""
    num_chains, num_draws = diverging.shape
    scalars = np.concatenate([np.asarray(value, dtype=np.float64).reshape(num_chains, num_draws, -1)
                              for value in samples.values()], axis=2)
    return {
        "r_hat_max": float(np.max(split_r_hat(scalars))) if num_chains > 1 else None,  # NaN propagates
        "ess_bulk_min": float(np.min(ess_bulk(scalars))),
        "ess_tail_min": float(np.min(ess_tail(scalars))),
        "divergences": int(diverging.sum()),
    }


def chain_diagnostics(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor, diverging: np.ndarray,
                      failed_chains: int = 0) -> ChainDiagnostics:
    r"""The :class:`ChainDiagnostics` of draws ``samples[site]`` ``(chains, draws, *site_shape)`` of ``model`` fitted on
    inputs ``x``, with ``diverging`` ``(chains, draws)`` and ``failed_chains`` chains lost to errors: the verdict of the
    module notes; the weights' :math:`\max\hat{R}` and ESS are reported, not judged."""
    found = weight_diagnostics({name: torch.as_tensor(value).cpu().numpy() for name, value in samples.items()}, diverging)
    num_chains = diverging.shape[0]
    predictive = predictive_draws(model, samples, x)
    r_hat_predictive = r_hat_predictive_bulk = None
    if num_chains > 1:
        bulk, tail = split_r_hat_parts(predictive)
        r_hat_predictive, r_hat_predictive_bulk = float(np.max(np.maximum(bulk, tail))), float(np.max(bulk))  # NaN propagates
    ess_predictive_min = float(np.min(ess_bulk(predictive)))  # constant draws give NaN, which fails below
    converged = (num_chains > 1 and failed_chains == 0 and found["divergences"] == 0
                 and r_hat_predictive <= R_HAT_THRESHOLD and ess_predictive_min >= MIN_ESS_PER_CHAIN * num_chains)
    return ChainDiagnostics(**found, r_hat_predictive=r_hat_predictive, r_hat_predictive_bulk=r_hat_predictive_bulk,
                            ess_predictive_min=ess_predictive_min, num_chains=num_chains, failed_chains=failed_chains,
                            converged=bool(converged))


def r_hat_over_points(f: np.ndarray) -> float:
    r"""The largest :math:`\hat{R}` over the trailing axes of ``f``, of shape ``(chains, draws, *points)`` (chains >= 2);
    NaN when some point's draws are constant."""
    if f.ndim < 2 or f.shape[0] < 2:
        raise ValueError(f"R-hat needs draws of shape (chains >= 2, draws, ...), got {f.shape}; run two or more chains")
    return float(np.max(split_r_hat(f.reshape(*f.shape[:2], -1))))  # a NaN propagates


def predictive_draws(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor) -> np.ndarray:
    r"""The predictive quantities of draws ``samples[site]`` ``(chains, draws, *site_shape)`` of ``model``: the network
    output at the inputs ``x`` (``(n, in_features)``; at most ``MAX_POINTS`` of them, evenly spaced) and the likelihood's
    latents, as a float64 array ``(chains, draws, quantities)``; the network is computed a batch of draws at a time
    (:func:`~bnn.models.draw_batches.draw_batches`)."""
    chains, draws = next(iter(samples.values())).shape[:2]
    index = torch.linspace(0, x.shape[0] - 1, min(x.shape[0], MAX_POINTS)).round().long()
    values = {name: torch.as_tensor(value).reshape(chains * draws, *value.shape[2:]) for name, value in samples.items()}
    with torch.no_grad():  # (chains * draws, points, out), a batch of draws at a time
        f = torch.cat([model.forward(x[index], batch) for batch in draw_batches(model, index.shape[0], values)])
    latents = [value.reshape(chains * draws, -1) for value in model.likelihood_latents(values).values()]
    predictive = torch.cat([f.reshape(chains * draws, -1), *latents], dim=1).to(torch.float64)
    return predictive.reshape(chains, draws, -1).cpu().numpy()


def predictive_r_hat(model, samples: Mapping[str, torch.Tensor], x: torch.Tensor) -> float:
    r""":math:`\hat{R}_{\text{pred}}` of ``model`` over :func:`predictive_draws` (two or more chains)."""
    return r_hat_over_points(predictive_draws(model, samples, x))


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
    r_hat_predictive_bulk : float or None
        The largest bulk part of the same :math:`\hat{R}` (where the chains lie, not how far they spread; module
        notes); ``None`` for one chain, or in a record saved before the collection kept it.
    ess_bulk_min, ess_tail_min : float
        The smallest bulk and tail effective sample sizes over every scalar parameter.
    divergences : int
        Divergent transitions among the draws kept.
    converged : bool
        The module's verdict: two or more chains, none failed, no divergence, :math:`\hat{R}_{\text{pred}} \le 1.01`
        and ``ess_predictive_min`` at least ``MIN_ESS_PER_CHAIN`` per chain.
    ess_predictive_min : float or None
        The smallest bulk effective sample size over the predictive quantities (:func:`predictive_draws`); ``None`` in
        a record saved before the collection measured it (as is ``num_chains``).
    num_chains : int or None
        The chains whose draws were judged.
    failed_chains : int
        Chains lost to an error.
    """

    r_hat_max: float | None
    r_hat_predictive: float | None
    ess_bulk_min: float
    ess_tail_min: float
    divergences: int
    converged: bool
    ess_predictive_min: float | None = None
    num_chains: int | None = None
    failed_chains: int = 0
    r_hat_predictive_bulk: float | None = None

    def problems(self) -> list[str]:
        """Why the run did not converge, one phrase per failed check (empty when it converged)."""
        found = []
        if self.num_chains is not None and self.num_chains < 2:
            found.append("one chain ran to the end: R-hat, which compares chains, cannot be computed")
        if self.failed_chains:
            found.append(f"{self.failed_chains} chain(s) failed")
        if self.chains_agree is False and self.spread_only:
            found.append(f"the chains agree on where the predictions lie (bulk R-hat {self.r_hat_predictive_bulk:.3f}) "
                         f"but not on how far they spread: predictive R-hat (of f(x) at the training inputs and of the "
                         f"noise) {self.r_hat_predictive:.3f} > {R_HAT_THRESHOLD}, from its tail part (max R-hat over "
                         f"the weights {self.r_hat_max:.3f})")
        elif self.chains_agree is False:  # a NaN R-hat too
            found.append(f"the chains disagree on the predictions: predictive R-hat (of f(x) at the training inputs and "
                         f"of the noise) {self.r_hat_predictive:.3f} > {R_HAT_THRESHOLD} (max R-hat over the weights "
                         f"{self.r_hat_max:.3f}, which hidden units that permute between chains inflate)")
        if self.divergences:
            found.append(f"{self.divergences} divergent transitions")
        needed = MIN_ESS_PER_CHAIN * (self.num_chains or 1)
        if self.ess_predictive_min is not None and not self.ess_predictive_min >= needed:
            found.append(f"the predictions' smallest bulk ESS is {self.ess_predictive_min:.1f} < {needed} "
                         f"({MIN_ESS_PER_CHAIN} per chain)")
        return found

    @property
    def spread_only(self) -> bool:
        """Whether the chains agree on where the predictions lie (bulk :math:`\\hat{R}_{\\text{pred}} \\le 1.01`), so that
        any failure of :math:`\\hat{R}_{\\text{pred}}` is in their spread alone; ``False`` where the bulk part is
        unknown."""
        return self.r_hat_predictive_bulk is not None and bool(self.r_hat_predictive_bulk <= R_HAT_THRESHOLD)

    @property
    def chains_agree(self) -> bool | None:
        """Whether the chains agree on the predictions (:math:`\\hat{R}_{\\text{pred}} \\le 1.01`); ``None`` for one chain."""
        return None if self.r_hat_predictive is None else bool(self.r_hat_predictive <= R_HAT_THRESHOLD)


class ConvergenceWarning(UserWarning):
    """A Markov-chain run (NUTS, SG-MCMC) shows divergences or chains that disagree (R-hat above 1.01)."""


class IncompleteSamplingWarning(UserWarning):
    """A Markov-chain run returns fewer draws than asked: a chain failed, or the run was interrupted."""
