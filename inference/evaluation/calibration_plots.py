"""Pictures of calibration and selective prediction, one panel per fit: reliability diagrams with their confidence
histograms (classification), PIT histograms (regression), and the risk-coverage curves of every fit on one axis.
Saved by :func:`~bnn.inference.evaluation.figure_files.save_figure`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.calibration import (
    CALIBRATION_BINS,
    probability_integral_transform,
    reliability_bins,
    top_label_confidence,
)
from bnn.inference.evaluation.figure_files import save_figure
from bnn.inference.evaluation.selective import risk_coverage, uncertainty_and_loss


def plot_reliability(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Reliability diagrams, one column per fit: accuracy against confidence of the predicted label in equal-width
    bins (the gap to the diagonal shaded), and under it how many test points fall in each bin."""
    figure, axes = plt.subplots(2, len(posteriors), figsize=(3.2 * len(posteriors), 5.2), squeeze=False,
                                sharex=True, gridspec_kw={"height_ratios": [3, 1]}, layout="constrained")
    edges = np.linspace(0, 1, CALIBRATION_BINS + 1)
    for column, (label, posterior) in enumerate(posteriors.items()):
        predicted, confidence = top_label_confidence(dataset.task, posterior.predict(dataset.x_test).probs)
        bins = reliability_bins(confidence, predicted == dataset.y_test.long())
        top, bottom = axes[0, column], axes[1, column]
        top.bar(bins.confidence, bins.accuracy, width=0.06, color=f"C{column}", alpha=0.8, label="accuracy")
        top.vlines(bins.confidence, bins.accuracy, bins.confidence, color="r", lw=2, label="gap")
        top.plot([0, 1], [0, 1], "k--", lw=0.8)
        top.set(title=f"{label}\nECE {bins.ece:.3f}, MCE {bins.mce:.3f}", ylabel="accuracy" if column == 0 else None,
                xlim=(0, 1), ylim=(0, 1))
        bottom.hist(confidence.numpy(), bins=edges, color=f"C{column}", alpha=0.8)
        bottom.set(xlabel="confidence", ylabel="test points" if column == 0 else None)
    axes[0, 0].legend(fontsize="small", loc="upper left")
    figure.suptitle(f"Reliability on {dataset.name}")
    return save_figure(figure, path)


def plot_pit(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Histograms of the probability integral transform of the test targets, one panel per fit: flat for a
    calibrated predictive, U-shaped for an overconfident one, humped for an underconfident one."""
    figure, axes = plt.subplots(1, len(posteriors), figsize=(3.2 * len(posteriors), 3), squeeze=False, sharey=True,
                             layout="constrained")
    for column, (label, posterior) in enumerate(posteriors.items()):
        prediction = posterior.predict(dataset.x_test)
        pit = probability_integral_transform(prediction.draws.reshape(len(prediction.draws), -1),
                                             dataset.y_test.reshape(-1).to(prediction.draws.dtype))
        axis = axes[0, column]
        axis.hist(pit.numpy(), bins=10, range=(0, 1), density=True, color=f"C{column}", alpha=0.8)
        axis.axhline(1, color="k", ls="--", lw=0.8)
        axis.set(title=label, xlabel="PIT", ylabel="density" if column == 0 else None)
    figure.suptitle(f"Probability integral transform on {dataset.name} (flat is calibrated)")
    return save_figure(figure, path)


def plot_selective(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Risk against coverage, every fit on one axis: the error rate (classification) or RMSE in the target's units
    (regression) of the test points kept when the least certain are dropped."""
    figure, axis = plt.subplots(figsize=(5.5, 4))
    for label, posterior in posteriors.items():
        prediction = posterior.predict(dataset.x_test)
        ranked = uncertainty_and_loss(dataset.task, prediction, dataset.y_test, dataset.y_scaler.std)
        coverage, risk = risk_coverage(*ranked, root=dataset.task == "regression")
        axis.plot(coverage, risk, label=f"{label} (AURC {risk.mean():.3g})")
    axis.set(xlabel="share of test points kept (most certain first)",
             ylabel="RMSE" if dataset.task == "regression" else "error rate", title=f"Selective prediction on {dataset.name}")
    axis.legend(fontsize="small")
    return save_figure(figure, path)
