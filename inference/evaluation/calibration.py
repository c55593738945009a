r"""Calibration: whether a posterior's probabilities and intervals mean what they say.

Classification, from the predicted label's confidence :math:`c_i` and whether it was right, :math:`r_i`, over bins
:math:`B_b` of confidence, equal-width (:math:`[0, 0.1), [0.1, 0.2), \dots`) or equal-mass (the same number of points
in each, Nixon et al. 2019's adaptive bins, which do not leave the rare low-confidence bins to a handful of points):

.. math::

    \mathrm{ECE} = \sum_b \frac{|B_b|}{n} |\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|,\qquad
    \mathrm{MCE} = \max_b |\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|,

and the Brier score, the mean squared error of the class probabilities: :math:`\frac{1}{n}\sum_i (p_i - y_i)^2`
for a binary classifier (scikit-learn's ``brier_score_loss``), :math:`\frac{1}{n}\sum_i \sum_k (p_{ik} -
[y_i = k])^2` with :math:`K` classes (Brier 1950's original, twice the binary one for :math:`K = 2`).

Regression, from the predictive draws :math:`\tilde y_{is}`:

- the probability integral transform :math:`u_i = \hat F_i(y_i)`, the share of draws at or below the target,
  uniform on :math:`[0, 1]` for a calibrated predictive (its histogram is the regression reliability diagram);
- the quantile calibration curve :math:`\hat P(u \le p)` against :math:`p`, and its error
  :math:`\frac{1}{L}\sum_l |\hat P(u \le p_l) - p_l|` over the levels :data:`QUANTILE_LEVELS` (Kuleshov et al. 2018);
- the continuous ranked probability score, :math:`\mathrm{CRPS}(F, y) = \mathbb{E}|Y - y| -
  \frac{1}{2}\mathbb{E}|Y - Y'|`, a proper score in the target's units (lower is better), from the :math:`S` draws
  sorted, :math:`x_{(1)} \le \dots \le x_{(S)}`, by the quantile decomposition (scoringrules' default estimator,
  equal to the energy form with :math:`Y, Y'` drawn from the draws' empirical distribution):

  .. math::

      \widehat{\mathrm{CRPS}}_i = \frac{2}{S^2} \sum_{k=1}^{S} (x_{(k)} - y_i)
      \left(S\,[y_i < x_{(k)}] - k + \tfrac{1}{2}\right).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

CALIBRATION_BINS = 10
QUANTILE_LEVELS = tuple(np.round(np.arange(0.05, 0.951, 0.05), 2))
"""The levels :math:`p_l` of the quantile calibration curve: 0.05, 0.10, ..., 0.95."""
BINNINGS = ("width", "mass")
CRPS_COLUMNS = 4096
"""The points scored at once by :func:`crps`: its work holds a few arrays of :math:`S` by these many numbers."""


@dataclass(frozen=True)
class ReliabilityBins:
    """The non-empty confidence bins of a reliability diagram: per bin its mean ``confidence``, its ``accuracy``
    and its ``count`` of points (arrays of one length)."""

    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray

    @property
    def gaps(self) -> np.ndarray:
        return np.abs(self.accuracy - self.confidence)

    @property
    def ece(self) -> float:
        return float((self.count * self.gaps).sum() / self.count.sum())

    @property
    def mce(self) -> float:
        return float(self.gaps.max())


def reliability_bins(confidence: torch.Tensor, correct: torch.Tensor, bins: int = CALIBRATION_BINS,
                     binning: str = "width") -> ReliabilityBins:
    """Bin ``confidence`` ``(n,)`` with whether each prediction was ``correct`` into ``bins`` equal-width or
    equal-mass bins (module notes); equal-mass bins split the points sorted by confidence into ``bins`` runs of
    sizes that differ by one at most."""
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    confidence, correct = confidence.double().numpy(), correct.double().numpy()
    if binning == "width":
        index = np.clip(np.digitize(confidence, np.linspace(0, 1, bins + 1)[1:-1]), 0, bins - 1)
    else:
        index = np.empty(len(confidence), dtype=int)
        index[np.argsort(confidence, kind="stable")] = np.arange(len(confidence)) * bins // len(confidence)
    used = np.unique(index)
    return ReliabilityBins(np.array([confidence[index == b].mean() for b in used]),
                           np.array([correct[index == b].mean() for b in used]),
                           np.array([(index == b).sum() for b in used]))


def top_label_confidence(task: str, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The predicted label and its probability, for binary (``probs`` of class 1) or multiclass."""
    if task == "binary":
        label = (probs > 0.5).long()
        return label, torch.where(label == 1, probs, 1 - probs)
    confidence, label = probs.max(-1)
    return label, confidence


def brier_score(task: str, probs: torch.Tensor, y: torch.Tensor) -> float:
    """The Brier score of the module notes for ``probs`` (binary: of class 1, ``(n,)``; else ``(n, K)``), by
    scikit-learn's ``brier_score_loss``."""
    from sklearn.metrics import brier_score_loss  # scikit-learn loads at the first score, not with the package

    probs = probs.double()
    if task != "binary":
        probs = probs / probs.sum(-1, keepdim=True)  # float32 rows can miss 1 by more than scikit-learn allows
    labels = [0, 1] if task == "binary" else list(range(probs.shape[-1]))
    return float(brier_score_loss(y.long().numpy(), probs.numpy(), labels=labels))


def probability_integral_transform(draws: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    r""":math:`u_i`, the share of the predictive ``draws`` ``(S, n)`` at or below ``y`` ``(n,)`` (ties count half)."""
    below, equal = (draws < y).double().mean(0), (draws == y).double().mean(0)
    return below + equal / 2


def quantile_calibration(pit: torch.Tensor, levels=QUANTILE_LEVELS) -> np.ndarray:
    r""":math:`\hat P(u \le p)` at each of ``levels``, from the PIT values ``pit``."""
    values = pit.double().numpy()
    return np.array([(values <= level).mean() for level in levels])


def quantile_calibration_error(pit: torch.Tensor, levels=QUANTILE_LEVELS) -> float:
    r"""Mean :math:`|\hat P(u \le p) - p|` over ``levels``: 0 for a calibrated predictive, 0.5 for one whose draws all
    lie on one side of every target."""
    return float(np.abs(quantile_calibration(pit, levels) - np.asarray(levels)).mean())


def crps(draws: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per point the CRPS of the predictive ``draws`` ``(S, n)`` at ``y`` ``(n,)``, by the quantile decomposition (the
    module's notes), in double precision, :data:`CRPS_COLUMNS` points at a time (the work is :math:`S` by the
    columns); NaN where ``y`` is NaN."""
    x = torch.sort(draws.double(), dim=0).values
    size = x.shape[0]
    rank = torch.arange(1, size + 1, dtype=torch.float64).unsqueeze(1)
    scores = [((x_part - y_part) * (size * (y_part < x_part) - rank + 0.5)).sum(0)
              for x_part, y_part in zip(x.split(CRPS_COLUMNS, dim=1), y.double().split(CRPS_COLUMNS))]
    return 2 / size**2 * torch.cat(scores)  # split gives one block at least, an empty one for no points
