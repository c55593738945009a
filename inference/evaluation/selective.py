r"""Selective prediction: how good the predictions are when the model may abstain on its least certain inputs.

Sort the test points by an uncertainty (the predictive entropy of a classifier, the predictive standard deviation of
a regression), keep the :math:`k` most certain and score them: the risk at coverage :math:`k/n` is the error rate
(classification) or the RMSE (regression) of the kept points. The risk-coverage curve falls from right to left when
the uncertainty ranks the errors; its area, AURC, the mean risk over :math:`k = 1..n` (Geifman, Uziel and El-Yaniv
2019), is lower for a better ranking and a better model. An uncertainty that ignores the errors gives a flat curve at
the overall risk on average.
"""

from __future__ import annotations

import numpy as np
import torch
from bnn.inference.core.prediction import Prediction
from bnn.inference.evaluation.calibration import top_label_confidence


def uncertainty_and_loss(task: str, prediction: Prediction, y: torch.Tensor, scale: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per test point the uncertainty that ranks it and the loss it scores, ``(n,)`` each: the predictive entropy
    and the 0-1 error of the predicted label (classification); the predictive sd and the squared error in the target's
    units, ``scale`` its standard deviation (regression; several outputs: their means)."""
    if task != "regression":
        predicted, _ = top_label_confidence(task, prediction.probs)
        return prediction.entropy, (predicted != y.long()).double()
    squared_error = ((prediction.mean - y) * scale) ** 2
    return ((prediction.std * scale).reshape(len(y), -1).mean(-1), squared_error.reshape(len(y), -1).mean(-1))


def risk_coverage(uncertainty: torch.Tensor, loss: torch.Tensor, *, root: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r"""The coverages :math:`k/n`, :math:`k = 1..n`, and the risk at each: the mean ``loss`` ``(n,)`` of the
    :math:`k` points of lowest ``uncertainty`` ``(n,)`` (ties in the order given), its square root with ``root``
    (an RMSE from squared errors)."""
    order = np.argsort(uncertainty.double().numpy(), kind="stable")
    kept = np.arange(1, len(order) + 1)
    risk = np.cumsum(loss.double().numpy()[order]) / kept
    return kept / len(order), np.sqrt(risk) if root else risk


def area_under_risk_coverage(uncertainty: torch.Tensor, loss: torch.Tensor, *, root: bool = False) -> float:
    """AURC, the mean risk over the curve of :func:`risk_coverage`."""
    return float(risk_coverage(uncertainty, loss, root=root)[1].mean())
