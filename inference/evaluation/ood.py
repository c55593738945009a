r"""Out-of-distribution detection: does a posterior's uncertainty rise on inputs unlike its training data?

Each uncertainty :math:`u(x)` of a :class:`~bnn.inference.core.prediction.Prediction` (a classifier's predictive
entropy and mutual information, a regression's predictive and epistemic standard deviation) is used as a detector,
the shifted inputs (:mod:`bnn.inference.evaluation.shift_sets`) the positives and the in-distribution inputs the
negatives:

- ``auroc``: the area under the ROC curve, the probability that a shifted input is more uncertain than an
  in-distribution one (ties count half); 0.5 for an uncertainty that ignores the input;
- ``aupr``: the average precision with the shifted inputs as positives (its chance level is their share);
- ``fpr_at_95_tpr``: the share of in-distribution inputs flagged when the threshold flags 95% of shifted ones.

A point estimate's epistemic part is zero everywhere (AUROC 0.5); the MAP network's total uncertainty is the baseline
a Bayesian method must beat to have bought anything here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch
from bnn.inference.core.method import METHODS
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.shift_sets import ShiftSplit

UNCERTAINTIES = {"regression": ("std", "epistemic_std"), "binary": ("entropy", "mutual_information"),
                 "multiclass": ("entropy", "mutual_information")}
"""The :class:`~bnn.inference.core.prediction.Prediction` fields scored per task, total uncertainty first."""
DETECTION_TPR = 0.95


def detection_scores(uncertainty_in: torch.Tensor, uncertainty_out: torch.Tensor) -> dict[str, float]:
    """``auroc``, ``aupr`` and ``fpr_at_95_tpr`` (module notes) of an uncertainty at in-distribution and shifted
    inputs, by scikit-learn."""
    labels = np.concatenate([np.zeros(len(uncertainty_in)), np.ones(len(uncertainty_out))])
    scores = torch.cat([uncertainty_in, uncertainty_out]).double().numpy()
    from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve  # at the first score, not with the package

    false_positive, true_positive, _ = roc_curve(labels, scores)
    return {"auroc": float(roc_auc_score(labels, scores)), "aupr": float(average_precision_score(labels, scores)),
            "fpr_at_95_tpr": float(false_positive[np.searchsorted(true_positive, DETECTION_TPR)])}


def uncertainty_per_input(prediction, field: str) -> torch.Tensor:
    """The uncertainty ``field`` of ``prediction`` per input (several regression outputs: their mean)."""
    values = getattr(prediction, field)
    return values.reshape(len(values), -1).mean(-1)


def ood_table(posteriors: Mapping[str, Posterior], split: ShiftSplit) -> pd.DataFrame:
    """Per fit and uncertainty of the task (:data:`UNCERTAINTIES`) the detection scores on the shift set ``split``
    (:func:`~bnn.inference.evaluation.shift_sets.shift_split`; the fits learnt from ``split.dataset``); indexed by
    ``(fit, uncertainty)``, with the numbers of in-distribution and shifted inputs in ``attrs["inputs"]``."""
    rows = {}
    for label, posterior in posteriors.items():
        inside, outside = posterior.predict(split.x_in), posterior.predict(split.x_out)
        for field in UNCERTAINTIES[split.dataset.task]:
            rows[(label, field)] = detection_scores(uncertainty_per_input(inside, field),
                                                    uncertainty_per_input(outside, field))
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["fit", "uncertainty"])
    table.attrs["inputs"] = (len(split.x_in), len(split.x_out))
    return table


def auroc_columns(table: pd.DataFrame, label: str, task: str) -> dict[str, float]:
    """``ood_auroc_total`` and ``ood_auroc_epistemic``: the AUROC of fit ``label``'s total and epistemic uncertainty
    (:data:`UNCERTAINTIES`) in :func:`ood_table`'s ``table``, for a table of one row per fit."""
    total, epistemic = UNCERTAINTIES[task]
    return {"ood_auroc_total": table.loc[(label, total), "auroc"], "ood_auroc_epistemic": table.loc[(label, epistemic), "auroc"]}


def map_baseline_lines(table: pd.DataFrame, posteriors: Mapping[str, Posterior], task: str) -> list[str]:
    """Whether each Bayesian fit's best uncertainty (the larger AUROC of its total and epistemic one) separates the
    shift set better than the MAP network's total uncertainty, when a MAP fit is among ``posteriors``."""
    total = UNCERTAINTIES[task][0]
    baselines = [label for label, posterior in posteriors.items() if METHODS.get(posterior.method).point_estimate]
    if not baselines:
        points = " or ".join(f"`{name}`" for name in METHODS.names() if METHODS.get(name).point_estimate)
        return [f"No MAP fit in this comparison: add {points} to `--methods` to see what the Bayesian fits buy over it."]
    reference = table.loc[(baselines[0], total), "auroc"]
    lines = []
    for label, posterior in posteriors.items():
        if METHODS.get(posterior.method).point_estimate:
            continue
        auroc = max(table.loc[(label, field), "auroc"] for field in UNCERTAINTIES[task])
        verdict = "beats" if auroc > reference else "does not beat"
        lines.append(f"{label} {verdict} the MAP network: AUROC {auroc:.3f} (its best uncertainty) against "
                     f"{reference:.3f} ({baselines[0]}'s {total}).")
    return lines
