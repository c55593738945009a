r"""Test-set metrics of a posterior, in the target's original units.

With targets standardised as :math:`z = (y - \mu_y)/s_y`, an RMSE scales by
:math:`s_y` and a log-density shifts by :math:`-\log s_y` (the Jacobian of the map).

Regression: ``test_rmse`` of the predictive mean, ``test_ll`` the mean over test points
of :math:`\log p(y^* \mid x^*, \mathcal{D})`, and ``coverage_50`` / ``coverage_90`` the
fraction of test targets inside the central 50% / 90% predictive intervals.
Classification: ``test_accuracy``, ``test_ll``, ``roc_auc`` (binary, from the posterior
mean probability of class 1) and ``ece``, the expected calibration error over 10 equal-width
confidence bins.
"""

from __future__ import annotations

import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.prediction import Prediction, PredictiveType
from sklearn.metrics import roc_auc_score

from bnn.options import parse_option

CALIBRATION_BINS = 10


def expected_calibration_error(confidence: torch.Tensor, correct: torch.Tensor, bins: int = CALIBRATION_BINS) -> float:
    r""":math:`\sum_b \frac{|B_b|}{n} |\mathrm{acc}(B_b) - \mathrm{conf}(B_b)|` over equal-width confidence bins."""
    edges = torch.linspace(0, 1, bins + 1)
    index = torch.bucketize(confidence, edges[1:-1])
    error = 0.0
    for b in range(bins):
        members = index == b
        if members.any():
            gap = correct[members].float().mean() - confidence[members].mean()
            error += members.float().mean().item() * abs(gap.item())
    return error


def top_label_confidence(task: str, probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The predicted label and its probability, for binary (``probs`` of class 1) or multiclass."""
    if task == "binary":
        label = (probs > 0.5).long()
        return label, torch.where(label == 1, probs, 1 - probs)
    confidence, label = probs.max(-1)
    return label, confidence


def closed_form_log_density(task: str, prediction: Prediction, y: torch.Tensor) -> torch.Tensor:
    r"""Per point log-density of ``y`` under a predictive given by its moments or probabilities:
    :math:`\mathcal{N}(y; \mu, s^2)` for regression, the class probability otherwise."""
    if task == "regression":
        return torch.distributions.Normal(prediction.mean, prediction.std).log_prob(y)
    if task == "binary":
        return torch.distributions.Bernoulli(probs=prediction.probs.clamp(1e-12, 1 - 1e-12)).log_prob(y)
    return prediction.probs.clamp_min(1e-12).log().gather(-1, y.long().unsqueeze(-1)).squeeze(-1)


def evaluate(posterior: Posterior, dataset: Dataset, num_samples: int | None = None,
             predictive: PredictiveType | str | None = None) -> dict[str, float]:
    r"""Metrics of ``posterior`` on ``dataset``'s test split (see the module docstring).

    Parameters
    ----------
    posterior : Posterior
        A fit of a model sized for ``dataset``.
    dataset : Dataset
        Its test split is scored; ``dataset.task`` picks the metrics and ``dataset.y_scaler`` gives the
        original units.
    num_samples : int, optional
        Draws used by the Monte Carlo predictive, thinned evenly (default: all the posterior holds).
    predictive : {"mc", "linearized"}, optional
        As in :meth:`Posterior.predict` (default ``posterior.default_predictive``). The Monte Carlo density
        is the mixture over draws, :math:`\log \frac{1}{S}\sum_s p(y^* \mid x^*, W_s)`; the linearised one
        the Gaussian (or probit) closed form.

    Returns
    -------
    dict of str to float
        Regression: ``test_rmse``, ``test_ll``, ``coverage_50``, ``coverage_90``. Classification:
        ``test_accuracy``, ``test_ll``, ``ece``, and ``roc_auc`` when binary.
    """
    predictive = posterior.default_predictive if predictive is None else parse_option(PredictiveType, predictive,
                                                                                         "predictive")
    prediction = posterior.predict(dataset.x_test, num_samples, predictive=predictive)
    y = dataset.y_test
    if predictive is PredictiveType.MC:
        targets = posterior.model.likelihood.check_targets(y, posterior.model.out_features)
        log_density = posterior.log_predictive_density(dataset.x_test, targets, predictive)
    else:
        log_density = closed_form_log_density(dataset.task, prediction, y.to(prediction.mean.dtype))
    if dataset.task == "regression":
        scale = dataset.y_scaler.std
        metrics = {
            "test_rmse": float(((prediction.mean - y) ** 2).mean().sqrt() * scale.mean()),
            "test_ll": float(log_density.mean() - scale.log().sum()),
        }
        for level in (0.5, 0.9):
            low, high = prediction.interval(level)
            metrics[f"coverage_{round(level * 100)}"] = float(((y >= low) & (y <= high)).float().mean())
        return metrics
    label, confidence = top_label_confidence(dataset.task, prediction.probs)
    correct = label == y.long()
    metrics = {
        "test_accuracy": float(correct.float().mean()),
        "test_ll": float(log_density.mean()),
        "ece": expected_calibration_error(confidence, correct),
    }
    if dataset.task == "binary":
        metrics["roc_auc"] = float(roc_auc_score(y.numpy(), prediction.probs.numpy()))
    return metrics
