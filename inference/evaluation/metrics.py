r"""Test-set metrics of a posterior, in the target's original units.

With targets standardised as :math:`z = (y - \mu_y)/s_y`, an RMSE scales by
:math:`s_y` and a log-density shifts by :math:`-\log s_y` (the Jacobian of the map).

Regression: ``test_rmse`` of the predictive mean, ``test_ll`` the mean over test points
of :math:`\log p(y^* \mid x^*, \mathcal{D})`, ``coverage_50`` / ``coverage_90`` the
fraction of test targets inside the central 50% / 90% predictive intervals and ``width_50`` / ``width_90`` their mean
width, ``crps`` the mean continuous ranked probability score and ``pit_calibration_error`` the quantile calibration
error of the probability integral transform (:mod:`bnn.inference.evaluation.calibration`), ``aurc`` the area under the
RMSE-coverage curve ranked by the predictive sd (:mod:`bnn.inference.evaluation.selective`).
Classification: ``test_accuracy``, ``test_ll``, ``roc_auc`` (binary, from the posterior
mean probability of class 1), ``brier``, ``ece`` / ``mce`` the expected and maximum calibration error over 10
equal-width confidence bins and ``ece_mass`` / ``mce_mass`` over 10 equal-mass bins, ``entropy`` and
``mutual_information`` the mean total and epistemic uncertainty in nats
(:class:`~bnn.inference.core.prediction.Prediction`), ``aurc`` the area under the error-rate-coverage curve ranked by
the entropy.
"""

from __future__ import annotations

import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.prediction import Prediction, PredictiveType
from bnn.inference.evaluation.calibration import (
    brier_score,
    crps,
    probability_integral_transform,
    quantile_calibration_error,
    reliability_bins,
    top_label_confidence,
)
from bnn.inference.evaluation.selective import area_under_risk_coverage, uncertainty_and_loss

from bnn.options import parse_option


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
        The entries of the module notes: regression ``test_rmse``, ``test_ll``, ``coverage_50``, ``coverage_90``,
        ``width_50``, ``width_90``, ``crps``, ``pit_calibration_error``, ``aurc``; classification ``test_accuracy``,
        ``test_ll``, ``roc_auc`` when binary, ``brier``, ``ece``, ``mce``, ``ece_mass``, ``mce_mass``, ``entropy``,
        ``mutual_information``, ``aurc``.
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
        return regression_metrics(prediction, y, log_density, dataset)
    label, confidence = top_label_confidence(dataset.task, prediction.probs)
    correct = label == y.long()
    width, mass = (reliability_bins(confidence, correct, binning=binning) for binning in ("width", "mass"))
    metrics = {
        "test_accuracy": float(correct.float().mean()),
        "test_ll": float(log_density.mean()),
        "brier": brier_score(dataset.task, prediction.probs, y),
        "ece": width.ece, "mce": width.mce, "ece_mass": mass.ece, "mce_mass": mass.mce,
        "entropy": float(prediction.entropy.mean()),
        "mutual_information": float(prediction.mutual_information.mean()),
        "aurc": area_under_risk_coverage(*uncertainty_and_loss(dataset.task, prediction, y)),
    }
    if dataset.task == "binary":
        from sklearn.metrics import roc_auc_score  # scikit-learn loads at the first score, not with the package

        metrics["roc_auc"] = float(roc_auc_score(y.numpy(), prediction.probs.numpy()))
    return metrics


def regression_metrics(prediction: Prediction, y: torch.Tensor, log_density: torch.Tensor, dataset: Dataset
                       ) -> dict[str, float]:
    """The regression entries of :func:`evaluate` from the standardised ``prediction`` and targets ``y``, in the
    target's original units (several outputs: each output's values pooled)."""
    scale = dataset.y_scaler.std
    draws, target = dataset.y_scaler.inverse(prediction.draws), dataset.y_scaler.inverse(y)
    metrics = {
        "test_rmse": float(((prediction.mean - y) ** 2).mean().sqrt() * scale.mean()),
        "test_ll": float(log_density.mean() - scale.log().sum()),
    }
    for level in (0.5, 0.9):
        low, high = prediction.interval(level)
        metrics[f"coverage_{round(level * 100)}"] = float(((y >= low) & (y <= high)).float().mean())
        metrics[f"width_{round(level * 100)}"] = float(((high - low) * scale).mean())
    pooled_draws, pooled_target = draws.reshape(draws.shape[0], -1), target.reshape(-1)
    return {
        **metrics,
        "crps": float(crps(pooled_draws, pooled_target).mean()),
        "pit_calibration_error": quantile_calibration_error(probability_integral_transform(pooled_draws, pooled_target)),
        "aurc": area_under_risk_coverage(*uncertainty_and_loss("regression", prediction, y, scale), root=True),
    }
