r"""Split conformal prediction on top of any posterior: intervals and label sets whose coverage holds on exchangeable
data whatever the posterior got wrong.

A score :math:`s(x, y)` measures how badly the posterior predictive fits a labelled point. On :math:`n` calibration
points, held out of the fit, take :math:`\hat q`, the :math:`k`-th smallest score with
:math:`k = \lceil (n + 1)(1 - \alpha) \rceil`. For a new point exchangeable with them
:math:`P(s(x^*, y^*) \le \hat q) \ge 1 - \alpha` (Vovk et al. 2005; Angelopoulos and Bates 2023), so the set
:math:`\{y : s(x^*, y) \le \hat q\}` covers :math:`y^*` with probability at least :math:`1 - \alpha`; for continuous
scores the coverage is exactly :math:`k / (n + 1)` on average over calibration sets, below
:math:`1 - \alpha + 1/(n + 1)`.

Regression (one output): the score is the residual in predictive standard deviations,
:math:`s = |y - \mu(x)| / \sigma(x)`, so the interval :math:`\mu(x) \pm \hat q\, \sigma(x)` is wide where the posterior
is unsure (Lei et al. 2018's locally weighted split conformal, with the posterior's :math:`\sigma`).

Classification: adaptive prediction sets (Romano, Sesia and Candes 2020), randomised. With the class probabilities
:math:`\pi_1(x) \ge \pi_2(x) \ge \dots` sorted, the score of a label is the mass of the labels ranked above it and
a uniform share of its own, :math:`s(x, y, u) = \sum_{j : \pi_j > \pi_y} \pi_j + u\, \pi_y`,
:math:`u \sim \mathcal{U}(0, 1)` drawn once per point; the set :math:`\{y : s(x, y, u) \le \hat q\}` is the labels
in order of probability until the mass passes :math:`\hat q`. The draw makes the scores continuous, so the coverage
is :math:`k / (n + 1)` on average, as for regression; the non-randomised sets, which keep the label that crosses
:math:`\hat q`, cover far more than promised when the model is confident. A point the model is sure of may get an empty set, which
the guarantee allows. The draws are seeded: the same seed gives the same sets.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
from bnn.datasets.validation import check_inputs_targets
from bnn.inference.core.posterior import Posterior

from bnn.options import seed as parse_seed


def calibration_rank(num_calibration: int, alpha: float) -> int:
    r""":math:`k = \lceil (n + 1)(1 - \alpha) \rceil`, the rank of :math:`\hat q` among ``num_calibration`` scores.

    Raises
    ------
    ValueError
        When ``alpha`` is not a number in (0, 1), or when :math:`k > n`: fewer than :math:`(1 - \alpha)/\alpha` calibration
        points cannot promise coverage :math:`1 - \alpha` with a finite set.
    """
    if not (isinstance(alpha, numbers.Real) and not isinstance(alpha, bool) and 0 < alpha < 1):
        raise ValueError(f"alpha must be a number in (0, 1) (the miscoverage: 0.1 for 90% coverage), got {alpha!r}")
    rank = math.ceil((num_calibration + 1) * (1 - alpha) - 1e-9)  # 1e-9: (n + 1)(1 - alpha) integer up to rounding
    if rank > num_calibration:
        needed = math.ceil((1 - alpha) / alpha - 1e-9)
        raise ValueError(f"coverage 1 - alpha = {1 - alpha:g} needs at least {needed} calibration points, got "
                         f"{num_calibration}; give more calibration points or raise alpha")
    return rank


def adaptive_set_scores(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    r"""Per point and label :math:`s(x, y, u)` of the module notes from ``probs`` ``(n, K)`` and ``uniform`` ``(n,)``,
    one draw per point; ties are ranked by label."""
    order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
    through = probs.gather(-1, order).cumsum(-1)
    above = torch.empty_like(through).scatter_(-1, order, through) - probs
    return above + uniform.to(probs.dtype).unsqueeze(-1) * probs


def uniform_draws(seed: int, stream: int, n: int) -> torch.Tensor:
    r"""``n`` draws of :math:`\mathcal{U}(0, 1)` from ``seed``'s ``stream`` (0: calibration, 1: prediction), streams
    independent of each other."""
    state = int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])
    return torch.rand(n, generator=torch.Generator().manual_seed(state), dtype=torch.float64)


def class_probabilities(task: str, probs: torch.Tensor) -> torch.Tensor:
    """``(n, K)`` class probabilities from a :class:`~bnn.inference.core.prediction.Prediction`'s ``probs`` (a
    binary one holds the probability of class 1 alone)."""
    return torch.stack([1 - probs, probs], dim=-1) if task == "binary" else probs


@dataclass(frozen=True)
class ConformalPredictor:
    r"""A posterior with a conformal threshold :math:`\hat q` calibrated at miscoverage ``alpha``
    (:func:`conformalize`).

    Attributes
    ----------
    posterior : Posterior
        The fitted posterior; its predictive (the method's default, its record's seed) gives every score.
    alpha : float
        The promised miscoverage: coverage at least :math:`1 - \alpha`.
    threshold : float
        :math:`\hat q`, in predictive standard deviations (regression) or probability mass (classification).
    num_calibration : int
        :math:`n`, the calibration points.
    seed : int
        Seeds the uniform draws of the classification scores.
    """

    posterior: Posterior
    alpha: float
    threshold: float
    num_calibration: int
    seed: int

    @property
    def task(self) -> str:
        return self.posterior.model.likelihood.task

    def interval(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The conformal interval :math:`\mu(x) \pm \hat q\, \sigma(x)` at inputs ``x`` ``(m, features)``; regression
        only."""
        if self.task != "regression":
            raise ValueError(f"interval is for regression; this posterior is a {self.task} classifier: use sets(x)")
        prediction = self.posterior.predict(x)
        half_width = self.threshold * prediction.std
        return prediction.mean - half_width, prediction.mean + half_width

    def sets(self, x: torch.Tensor) -> torch.Tensor:
        r"""The adaptive prediction sets at inputs ``x`` ``(m, features)``, a boolean ``(m, K)``: entry ``(i, y)``
        says whether label ``y`` is in the set of input ``i``; classification only."""
        if self.task == "regression":
            raise ValueError("sets is for classification; this posterior is a regression: use interval(x)")
        probs = class_probabilities(self.task, self.posterior.predict(x).probs)
        return adaptive_set_scores(probs, uniform_draws(self.seed, 1, probs.shape[0])) <= self.threshold

    def covers(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Whether each target of ``y`` lies in its interval or set at ``x``, a boolean ``(m,)``."""
        x, y = _checked(self.posterior, x, y)
        if self.task == "regression":
            low, high = self.interval(x)
            return (y >= low) & (y <= high)
        return self.sets(x).gather(-1, y.long().unsqueeze(-1)).squeeze(-1)


def _checked(posterior: Posterior, x, y) -> tuple[torch.Tensor, torch.Tensor]:
    model = posterior.model
    x, y = check_inputs_targets(x, y)
    if x.shape[1] != model.in_features:
        raise ValueError(f"the model reads {model.in_features} input features but x has {x.shape[1]}")
    if model.likelihood.task == "regression" and model.out_features != 1:
        raise ValueError(f"conformal intervals here are for one regression output; this model has {model.out_features}")
    return x, model.likelihood.check_targets(y, model.out_features)


def conformal_scores(posterior: Posterior, x: torch.Tensor, y: torch.Tensor, seed: int) -> torch.Tensor:
    """The score of the module notes at each labelled point, ``(n,)`` (``seed``'s calibration stream gives the
    classification scores' uniform draws); ``ValueError`` when one is not finite."""
    prediction = posterior.predict(x)
    task = posterior.model.likelihood.task
    if task == "regression":
        scores = (y - prediction.mean).abs() / prediction.std
    else:
        scores = adaptive_set_scores(class_probabilities(task, prediction.probs), uniform_draws(seed, 0, x.shape[0]))
        scores = scores.gather(-1, y.long().unsqueeze(-1)).squeeze(-1)
    bad = ~torch.isfinite(scores)
    if bad.any():
        found = ", ".join(sorted({str(value) for value in scores[bad].tolist()}))
        cause = (f"the smallest predictive standard deviation among them is {prediction.std[bad].min().item():g} (a "
                 "noise scale or posterior spread too small for the dtype, or not finite)" if task == "regression" else
                 "the predictive probabilities are not finite there")
        raise ValueError(f"the conformity scores of {int(bad.sum())} of the {scores.shape[0]} calibration points are not "
                         f"finite ({found}): {cause}, so no threshold can be calibrated; refit with a larger noise scale "
                         "(or in float64) and check the fit's predictions")
    return scores


def conformalize(posterior: Posterior, x_cal, y_cal, alpha: float = 0.1, *, seed: int | None = None
                 ) -> ConformalPredictor:
    r"""Calibrate ``posterior`` on held-out ``(x_cal, y_cal)`` for coverage :math:`1 - \alpha` (module notes).

    Parameters
    ----------
    posterior : Posterior
        Any fit (every method's); regression with one output, binary or multiclass classification.
    x_cal, y_cal : array-like
        Calibration inputs ``(n, features)`` and targets ``(n,)``, in the units the posterior was fitted in: points it
        was not fitted on (carved from the training data, never the test data), exchangeable with those it will
        predict at.
    alpha : float
        Miscoverage in (0, 1): the sets cover with probability at least :math:`1 - \alpha`.
    seed : int, optional
        Seeds the classification scores' uniform draws (default: the posterior's own seed).

    Returns
    -------
    ConformalPredictor
        ``interval(x)`` (regression) or ``sets(x)`` (classification), and ``covers(x, y)``.

    Raises
    ------
    ValueError
        For calibration data the model cannot read (wrong width, NaN, labels it does not know), a regression with
        several outputs, ``alpha`` not a number in (0, 1), fewer calibration points than coverage :math:`1 - \alpha`
        needs, or a fit whose scores are not finite there (a predictive standard deviation that underflows to 0).
    """
    x, y = _checked(posterior, x_cal, y_cal)
    rank = calibration_rank(x.shape[0], alpha)
    seed = parse_seed("seed", posterior.record.seed if seed is None else seed)
    threshold = torch.sort(conformal_scores(posterior, x, y, seed)).values[rank - 1]
    return ConformalPredictor(posterior, alpha, float(threshold), x.shape[0], seed)
