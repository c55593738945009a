"""What a continual method leaves after one task: a predictor, the state it carries on, and its posterior."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from bnn.inference.core.posterior import Posterior


@dataclass(frozen=True)
class Learned:
    """The outcome of learning one task.

    Attributes
    ----------
    predict : callable
        ``x -> `` mean class probabilities ``(n, K)`` (classification) or predictive means ``(n,)`` (regression).
    carry : dict
        JSON-able state the next task starts from (the posterior as a prior's config, MAP weights, the coreset);
        written with the task's results, so that a resumed run goes on from it.
    posterior : Posterior, optional
        The posterior that predicts (Bayesian methods), saved with the task's results.
    """

    predict: Callable[[torch.Tensor], torch.Tensor]
    carry: dict[str, Any] = field(default_factory=dict)
    posterior: Posterior | None = None


def posterior_predictor(posterior: Posterior, seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``predict`` of a posterior: its mean class probabilities, or its predictive mean, at fixed ``seed``."""

    def predict(x: torch.Tensor) -> torch.Tensor:
        prediction = posterior.predict(x, seed=seed)
        return prediction.mean if prediction.probs is None else prediction.probs

    return predict
