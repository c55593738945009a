r"""What every continual method of a run shares: the benchmark, the options, the model, the data of each task.

The first task's prior is :math:`\mathcal{N}(0, s^2)` on every weight. A method that carries a posterior forward
gives task :math:`t` the prior :math:`q_{t-1}` (:class:`~bnn.models.posterior_prior.PosteriorPrior`), except for
the heads of tasks not yet learnt (:math:`s \ge t`, multi-head): they never saw data, so they get the first
prior back (the per-layer mapping ``{"*": q_{t-1}, "heads.t": N(0, s^2), ...}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from bnn.datasets.continual import ContinualBenchmark
from bnn.inference.continual.options import ContinualOptions
from bnn.models import BayesianMLP, GaussianLikelihood, GaussianPrior, MultiHeadMLP, Prior, get_prior
from bnn.models.multihead import task_inputs

REGRESSION_NOISE = 0.1
"""The known noise of the regression likelihood (the moving regression's own noise)."""


@dataclass(frozen=True)
class ContinualSetup:
    """A benchmark and the options of a run; builds the model and the inputs of each task."""

    benchmark: ContinualBenchmark
    options: ContinualOptions

    @property
    def num_tasks(self) -> int:
        return len(self.benchmark.tasks)

    @property
    def first_prior(self) -> GaussianPrior:
        return GaussianPrior(self.options.prior_scale)

    def model(self, prior: Prior | Mapping[str, Any] | None = None) -> BayesianMLP:
        """The network of the benchmark (multi-head or not) with ``prior`` (the first prior by default)."""
        benchmark = self.benchmark
        likelihood = (GaussianLikelihood(scale=REGRESSION_NOISE) if benchmark.likelihood == "gaussian"
                      else benchmark.likelihood)
        prior = self.first_prior if prior is None else prior
        if benchmark.multi_head:
            return MultiHeadMLP(benchmark.in_features, benchmark.out_features, num_heads=self.num_tasks,
                                hidden=self.options.hidden, prior=prior, likelihood=likelihood)
        return BayesianMLP(benchmark.in_features, benchmark.out_features, hidden=self.options.hidden, prior=prior,
                           likelihood=likelihood)

    def prior_for(self, task: int, previous: Mapping[str, Any] | None) -> Prior | dict[str, Prior]:
        """Task ``task``'s prior: the first prior, or the config ``previous`` of :math:`q_{t-1}` with fresh new heads."""
        if previous is None:
            return self.first_prior
        carried = get_prior(previous)
        if not self.benchmark.multi_head:
            return carried
        return {"*": carried, **{f"heads.{head}": self.first_prior for head in range(task, self.num_tasks)}}

    def inputs(self, task: int, features: torch.Tensor) -> torch.Tensor:
        """``features`` as the model reads them: with the task index as the last column for a multi-head model."""
        return task_inputs(features, task) if self.benchmark.multi_head else features

    def train_data(self, task: int, index: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Task ``task``'s training inputs and targets, the rows ``index`` only when given."""
        data = self.benchmark.tasks[task]
        x, y = data.x_train, data.y_train
        if index is not None:
            x, y = x[index], y[index]
        return self.inputs(task, x), y

    def test_data(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        data = self.benchmark.tasks[task]
        return self.inputs(task, data.x_test), data.y_test

    def score(self, predicted: torch.Tensor, y: torch.Tensor) -> float:
        """Accuracy of the mean class probabilities ``(n, K)``, or the RMSE of the predictive means ``(n,)``."""
        if self.benchmark.is_classification:
            return float((predicted.argmax(-1) == y).double().mean())
        return float((predicted - y).pow(2).mean().sqrt())


def starting_means(carried: Mapping[str, Any] | None) -> dict[str, torch.Tensor] | str:
    """The mean-field guide's start: the carried posterior's means, or small draws for the first task."""
    return "small" if carried is None else dict(get_prior(carried).loc)

