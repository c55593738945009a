r"""Posterior predictive summaries from Monte Carlo draws.

With draws :math:`W_s \sim q(W)` (or the exact posterior), :math:`s = 1..S`,

.. math::

    p(y^* \mid x^*, \mathcal{D}) \approx \frac{1}{S}\sum_s p(y^* \mid f(x^*; W_s)),\qquad
    \mathbb{E}[y^*] \approx \frac{1}{S}\sum_s \mathbb{E}[y^* \mid W_s],

    \operatorname{Var}[y^*] \approx \underbrace{\frac{1}{S}\sum_s \operatorname{Var}[y^* \mid W_s]}_{\text{aleatoric}}
    + \underbrace{\operatorname{Var}_s \mathbb{E}[y^* \mid W_s]}_{\text{epistemic}}.

For a classifier with class probabilities :math:`\pi_s = p(y^* \mid x^*, W_s)` the entropy of the predictive splits the
same way (Depeweg et al. 2018; the mutual information is BALD's score, Houlsby et al. 2011):

.. math::

    \underbrace{\mathbb{H}\Big[\frac{1}{S}\sum_s \pi_s\Big]}_{\text{total}}
    = \underbrace{\frac{1}{S}\sum_s \mathbb{H}[\pi_s]}_{\text{aleatoric}}
    + \underbrace{\mathbb{I}[y^*; W \mid x^*, \mathcal{D}]}_{\text{epistemic}},

in nats; the mutual information is zero for a point estimate and grows where the draws disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch


class PredictiveType(str, Enum):
    """How :meth:`bnn.inference.core.posterior.Posterior.predict` forms the posterior predictive."""

    MC = "mc"
    """Monte Carlo: the posterior's weight draws pushed through the network (every method)."""
    LINEARIZED = "linearized"
    r"""The network linearised at :math:`\theta_{MAP}` (the GLM predictive); methods with a linearisation only."""


@dataclass(frozen=True)
class Prediction:
    r"""Predictive draws and their summaries at ``n`` inputs.

    Attributes
    ----------
    draws : torch.Tensor
        Draws of :math:`y^*`, shape ``(S', n)`` (or ``(S', n, k)`` for k regression outputs): one per weight draw,
        or :math:`\lceil` ``MIN_OBSERVATION_DRAWS`` :math:`/ S \rceil` per weight draw when the posterior holds fewer
        than ``MIN_OBSERVATION_DRAWS`` (an ensemble of 5 members), so that the intervals read from them are not
        the spread of a handful of numbers.
    f : torch.Tensor
        Network outputs :math:`f(x^*; W_s)`, shape ``(S, n, out_features)``.
    mean, std : torch.Tensor
        Predictive mean and standard deviation (law of total variance), shape ``(n,)`` or ``(n, k)``.
        For classifiers, the mean and spread of the predicted label's indicator.
    epistemic_std : torch.Tensor
        The part of ``std`` due to the weights alone, :math:`\sqrt{\operatorname{Var}_s \mathbb{E}[y^* \mid W_s]}`.
    probs : torch.Tensor or None
        Classifiers only: posterior mean class probabilities, ``(n,)`` for binary
        (probability of class 1), ``(n, K)`` for K classes.
    entropy, expected_entropy, mutual_information : torch.Tensor or None
        Classifiers only, ``(n,)`` in nats: the predictive's entropy (total uncertainty), the mean entropy of the
        draws' predictions (aleatoric) and their difference, the mutual information between the label and the
        weights (epistemic); see the module notes.
    """

    draws: torch.Tensor
    f: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    epistemic_std: torch.Tensor
    probs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    expected_entropy: torch.Tensor | None = None
    mutual_information: torch.Tensor | None = None

    def interval(self, level: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Central predictive interval holding mass ``level`` (from the draws)."""
        if not 0 < level < 1:
            raise ValueError(f"level must lie in (0, 1), got {level}")
        tail = (1 - level) / 2
        draws = self.draws.to(torch.get_default_dtype())
        return torch.quantile(draws, tail, dim=0), torch.quantile(draws, 1 - tail, dim=0)


MIN_OBSERVATION_DRAWS = 1000
"""The fewest draws of :math:`y^*` a :class:`Prediction` holds (its intervals are quantiles of them)."""


def categorical_entropy(probs: torch.Tensor) -> torch.Tensor:
    r""":math:`-\sum_k \pi_k \log \pi_k` over the last axis of ``probs`` (:math:`0 \log 0 = 0`)."""
    return -torch.special.xlogy(probs, probs).sum(-1)


def entropy_split(per_draw: torch.Tensor, predictive: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Total entropy, expected entropy and mutual information (module notes) from the draws' class probabilities
    ``(S, n, K)``; ``predictive`` ``(n, K)`` is the predictive's probabilities where it is not the draws' mean (the
    linearised predictive's probit approximation)."""
    total = categorical_entropy(per_draw.mean(0) if predictive is None else predictive)
    expected = categorical_entropy(per_draw).mean(0)
    return total, expected, (total - expected).clamp_min(0)  # rounding can leave -1e-17 where the draws agree


def summarise(task: str, observation, f: torch.Tensor) -> Prediction:
    """Build a :class:`Prediction` from the per-draw observation distribution (batch ``(S, n)``)."""
    per_draw = math.ceil(MIN_OBSERVATION_DRAWS / f.shape[0])
    draws = observation.sample() if per_draw == 1 else observation.sample((per_draw,)).flatten(0, 1)
    if task == "multiclass":
        probs_per_draw = observation.probs
        probs = probs_per_draw.mean(0)
        labels = torch.arange(probs.shape[-1], dtype=probs.dtype)
        mean_per_draw = (probs_per_draw * labels).sum(-1)
        var_per_draw = (probs_per_draw * labels**2).sum(-1) - mean_per_draw**2
    else:
        mean_per_draw, var_per_draw = observation.mean, observation.variance
        probs = mean_per_draw.mean(0) if task == "binary" else None
    epistemic_var = mean_per_draw.var(0, unbiased=False)
    std = (var_per_draw.mean(0) + epistemic_var).sqrt()
    split = (None, None, None)
    if task != "regression":
        per_draw = probs_per_draw if task == "multiclass" else torch.stack([1 - mean_per_draw, mean_per_draw], -1)
        split = entropy_split(per_draw)
    return Prediction(draws, f, mean_per_draw.mean(0), std, epistemic_var.sqrt(), probs, *split)


def log_predictive_density(pointwise_log_lik: torch.Tensor) -> torch.Tensor:
    r"""Per point :math:`\log \frac{1}{S}\sum_s p(y_i \mid W_s)` from ``(S, n)`` log-likelihoods."""
    return torch.logsumexp(pointwise_log_lik, dim=0) - math.log(pointwise_log_lik.shape[0])
