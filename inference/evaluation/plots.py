"""Pictures of predictive distributions (:func:`~bnn.inference.evaluation.figure_files.save_figure` writes them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from bnn.datasets.dataset import Dataset
from bnn.inference.core.posterior import Posterior
from bnn.inference.evaluation.calibration_plots import plot_reliability
from bnn.inference.evaluation.distance import nearest_training_distance
from bnn.inference.evaluation.figure_files import save_figure


def plot_predictive_1d(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Predictive mean with 50% and 95% bands of each posterior over a 1-D data set, in original units.

    The grid runs half the data range beyond the data on both sides, so the growth of
    uncertainty in gaps and outside the data shows.
    """
    if dataset.in_features != 1:
        raise ValueError(f"plot_predictive_1d needs 1-D inputs; {dataset.name} has {dataset.in_features}")
    low, high = dataset.x_train.min().item(), dataset.x_train.max().item()
    margin = 0.5 * (high - low)
    grid = torch.linspace(low - margin, high + margin, 300).unsqueeze(-1)
    to_x = lambda v: dataset.x_scaler.inverse(v)[:, 0].numpy()  # noqa: E731
    to_y = dataset.y_scaler.inverse
    figure, axes = plt.subplots(1, len(posteriors), figsize=(5 * len(posteriors), 3.6), sharey=True, squeeze=False)
    for axis, (label, posterior) in zip(axes[0], posteriors.items()):
        prediction = posterior.predict(grid)
        for level, alpha in ((0.95, 0.18), (0.5, 0.3)):
            lower, upper = prediction.interval(level)
            axis.fill_between(to_x(grid), to_y(lower).numpy(), to_y(upper).numpy(), alpha=alpha, color="C0",
                              label=f"{round(level * 100)}% predictive")
        axis.plot(to_x(grid), to_y(prediction.mean).numpy(), color="C0", label="predictive mean")
        axis.scatter(to_x(dataset.x_train), to_y(dataset.y_train).numpy(), s=8, color="k", label="training data")
        axis.set_title(label)
        axis.set_xlabel("x")
    axes[0][0].set_ylabel("y")
    axes[0][0].legend(loc="best", fontsize="small")
    return save_figure(figure, path)


def plot_predicted_vs_observed(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Test targets against predictive means with one-standard-deviation bars, in original units."""
    figure, axes = plt.subplots(1, len(posteriors), figsize=(4.5 * len(posteriors), 4), squeeze=False)
    observed = dataset.y_scaler.inverse(dataset.y_test).numpy()
    for axis, (label, posterior) in zip(axes[0], posteriors.items()):
        prediction = posterior.predict(dataset.x_test)
        mean = dataset.y_scaler.inverse(prediction.mean).numpy()
        std = (prediction.std * dataset.y_scaler.std).numpy()
        axis.errorbar(observed, mean, yerr=std, fmt="o", ms=3, alpha=0.6, elinewidth=0.8)
        lims = [min(observed.min(), mean.min()), max(observed.max(), mean.max())]
        axis.plot(lims, lims, "k--", lw=0.8)
        axis.set(title=label, xlabel="observed", ylabel="predicted (±1 sd)")
    return save_figure(figure, path)


def plot_fit(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """The picture that suits the data: 1-D bands, predicted vs observed, or reliability."""
    if dataset.task != "regression":
        return plot_reliability(posteriors, dataset, path)
    if dataset.in_features == 1:
        return plot_predictive_1d(posteriors, dataset, path)
    return plot_predicted_vs_observed(posteriors, dataset, path)


def plot_predictive_overlay(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Every method's predictive mean and 90% band on one 1-D axis over the data, in original units."""
    if dataset.in_features != 1:
        raise ValueError(f"plot_predictive_overlay needs 1-D inputs; {dataset.name} has {dataset.in_features}")
    low, high = dataset.x_train.min().item(), dataset.x_train.max().item()
    grid = torch.linspace(low - 0.5 * (high - low), high + 0.5 * (high - low), 300).unsqueeze(-1)
    x = dataset.x_scaler.inverse(grid)[:, 0].numpy()
    figure, axis = plt.subplots(figsize=(7.5, 4.2))
    for index, (label, posterior) in enumerate(posteriors.items()):
        prediction = posterior.predict(grid)
        lower, upper = (dataset.y_scaler.inverse(v).numpy() for v in prediction.interval(0.9))
        axis.fill_between(x, lower, upper, color=f"C{index}", alpha=0.15)
        axis.plot(x, dataset.y_scaler.inverse(prediction.mean).numpy(), color=f"C{index}", label=f"{label} (90% band)")
    axis.scatter(dataset.x_scaler.inverse(dataset.x_train)[:, 0].numpy(), dataset.y_scaler.inverse(dataset.y_train).numpy(),
                 s=8, color="k", label="training data", zorder=3)
    axis.set(xlabel="x", ylabel="y", title=f"Predictive distributions on {dataset.name}")
    axis.legend(fontsize="small")
    return save_figure(figure, path)


def plot_std_vs_error(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Absolute test error against predictive standard deviation, in original units (calibrated: on the diagonal band)."""
    figure, axes = plt.subplots(1, len(posteriors), figsize=(4.2 * len(posteriors), 3.8), sharex=True, sharey=True,
                                squeeze=False)
    for axis, (label, posterior) in zip(axes[0], posteriors.items()):
        prediction = posterior.predict(dataset.x_test)
        error = ((prediction.mean - dataset.y_test).abs() * dataset.y_scaler.std).numpy()
        std = (prediction.std * dataset.y_scaler.std).numpy()
        axis.scatter(std, error, s=8, alpha=0.6)
        top = max(std.max(), error.max())
        axis.plot([0, top], [0, top], "k--", lw=0.8, label="|error| = sd")
        axis.plot([0, top], [0, 1.645 * top], "k:", lw=0.8, label="90% bound")
        axis.set(title=label, xlabel="predictive sd")
    axes[0][0].set_ylabel("|test error|")
    axes[0][0].legend(fontsize="small")
    return save_figure(figure, path)


def plot_std_vs_distance(posteriors: Mapping[str, Posterior], dataset: Dataset, path: str | Path) -> Path:
    """Predictive sd against the distance to the nearest training input, in original units, one line per method.

    The inputs are a grid over the training range and half of it beyond on both sides (1-D data), or the test
    inputs (otherwise); an honest posterior's sd grows with the distance, a point estimate's stays flat.
    """
    if dataset.in_features == 1:
        low, high = dataset.x_train.min().item(), dataset.x_train.max().item()
        x = torch.linspace(low - 0.5 * (high - low), high + 0.5 * (high - low), 300).unsqueeze(-1)
    else:
        x = dataset.x_test
    distance = nearest_training_distance(dataset.x_scaler.inverse(x), dataset.x_scaler.inverse(dataset.x_train))
    order = distance.argsort()
    figure, axis = plt.subplots(figsize=(6.5, 4))
    for index, (label, posterior) in enumerate(posteriors.items()):
        std = posterior.predict(x).std * dataset.y_scaler.std
        axis.plot(distance[order].numpy(), std[order].numpy(), ".", ms=3, color=f"C{index}", label=label)
    axis.set(xlabel="distance to the nearest training input", ylabel="predictive sd",
             title=f"Uncertainty away from the data ({dataset.name})")
    axis.legend(fontsize="small")
    return save_figure(figure, path)
