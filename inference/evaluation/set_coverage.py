r"""Conformal sets beside the posterior's own credible sets: do they hold their promised coverage on the test split,
and how large are they?

A posterior already gives sets of level :math:`1 - \alpha`: the central predictive interval (regression, the
:math:`\alpha/2` and :math:`1 - \alpha/2` quantiles of the predictive draws) and, for a classifier, the credible set,
the fewest labels in order of predictive probability whose mass reaches :math:`1 - \alpha`,

.. math::

    C(x) = \{\pi_{(1)}, \dots, \pi_{(k)}\},\qquad k = \min\{j : \textstyle\sum_{i \le j} \pi_{(i)}(x) \ge 1 - \alpha\}.

They cover :math:`1 - \alpha` of new points only if the posterior predictive is calibrated. The conformal predictor
(:mod:`bnn.inference.evaluation.conformal`) calibrated on held-out training rows promises that coverage whatever the
posterior got wrong. :func:`set_coverage` sets the two side by side on the test split: coverage and mean width (in the
target's units) or mean set size. The calibration rows are carved from the training split before any fit
(:func:`carve_calibration`), never from the test split.
"""

from __future__ import annotations

import dataclasses

import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.conformal import class_probabilities, conformalize
from bnn.inference.evaluation.shift_sets import ShiftSplit, shift_split

SET_LEVEL_ALPHA = 0.1
"""The miscoverage of the sets the report compares: 90% sets."""


def carve_calibration(dataset: Dataset, share: float, seed: int) -> tuple[Dataset, tuple[torch.Tensor, torch.Tensor]]:
    """``dataset`` with a seeded ``1 - share`` of its training rows, and the other ``share`` as calibration ``(x, y)``;
    the test split and the standardisation stay as they are.

    Raises
    ------
    ValueError
        When ``share`` is not in (0, 1) or leaves no training or no calibration row.
    """
    rows = len(dataset.x_train)
    cut = round(share * rows) if 0 < share < 1 else 0
    if not 0 < cut < rows:
        raise ValueError(f"the calibration share must lie in (0, 1) and leave rows on both sides; {share} of "
                         f"{dataset.name}'s {rows} training rows does not: use for example 0.2")
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(seed))
    kept, held = order[cut:], order[:cut]
    part = dataclasses.replace(dataset, x_train=dataset.x_train[kept], y_train=dataset.y_train[kept])
    return part, (dataset.x_train[held], dataset.y_train[held])


def carve_calibration_with_shift(loaded: Dataset, split: ShiftSplit | None, share: float, seed: int
                                 ) -> tuple[Dataset, tuple[torch.Tensor, torch.Tensor], ShiftSplit | None]:
    """:func:`carve_calibration` of the data the shift set ``split`` of ``loaded`` leaves to fit on (``held-out-classes``:
    ``loaded`` without those classes, whose rows must not calibrate either), and the shift set for the rows left: one
    that keeps the data is drawn again against them (``farthest`` measures against the training rows), one that
    changed the data keeps its inputs."""
    fitted, calibration = carve_calibration(split.dataset if split is not None else loaded, share, seed)
    if split is not None:
        split = shift_split(fitted, split.name) if split.dataset is loaded else dataclasses.replace(split, dataset=fitted)
    return fitted, calibration, split


def credible_sets(probs: torch.Tensor, level: float) -> torch.Tensor:
    """The credible sets of the module notes from class probabilities ``(n, K)``, a boolean ``(n, K)`` (entry ``(i,
    y)``: label ``y`` is in the set of point ``i``); ties are ranked by label."""
    order = torch.sort(probs, dim=-1, descending=True, stable=True).indices
    before = probs.gather(-1, order).cumsum(-1) - probs.gather(-1, order)  # the mass of the labels ranked above
    return torch.empty_like(before, dtype=torch.bool).scatter_(-1, order, before < level)


def set_coverage(posterior: Posterior, dataset: Dataset, calibration: tuple[torch.Tensor, torch.Tensor],
                 alpha: float = SET_LEVEL_ALPHA) -> dict[str, float]:
    r"""Test coverage and size of the posterior's own :math:`1 - \alpha` sets and of its conformal ones (module notes).

    Returns
    -------
    dict
        ``credible_coverage`` and ``conformal_coverage``; regression ``credible_width`` and ``conformal_width``
        (mean interval width, target's units), classification ``credible_set_size`` and ``conformal_set_size``
        (mean number of labels).
    """
    predictor = conformalize(posterior, *calibration, alpha=alpha)
    x, y = dataset.x_test, dataset.y_test
    prediction = posterior.predict(x)
    if dataset.task == "regression":
        y = y.reshape(prediction.mean.shape)
        scale = float(dataset.y_scaler.std.mean())
        intervals = {"credible": prediction.interval(1 - alpha), "conformal": predictor.interval(x)}
        return {f"{kind}_{measure}": value for kind, (low, high) in intervals.items() for measure, value in (
            ("coverage", float(((y >= low) & (y <= high)).double().mean())), ("width", float((high - low).mean()) * scale))}
    labels = y.long().unsqueeze(-1)
    sets = {"credible": credible_sets(class_probabilities(dataset.task, prediction.probs), 1 - alpha),
            "conformal": predictor.sets(x)}
    return {f"{kind}_{measure}": value for kind, chosen in sets.items() for measure, value in (
        ("coverage", float(chosen.gather(-1, labels).double().mean())), ("set_size", float(chosen.double().sum(-1).mean())))}
