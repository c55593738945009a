"""Stochastic variational inference: maximise the ELBO over a guide's parameters (:func:`fit_svi`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import for_hierarchical
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.svi.checkpoint import DEFAULT_CHECKPOINT_EVERY
from bnn.inference.svi.cost import COST
from bnn.inference.svi.fit import run_svi
from bnn.inference.svi.gradient_variance import GradientVariance, gradient_variance
from bnn.inference.svi.kl_weights import KLWeighting
from bnn.inference.svi.nonfinite import NonFiniteELBOError
from bnn.inference.svi.options import SVIOptions
from bnn.inference.svi.record import SVIRecord
from bnn.inference.svi.schedules import LRSchedule

METHOD = Method(
    "svi", SVIOptions, run_svi, SVIRecord, cost=COST, budget_floors={"steps": 1000},
    uci=UCIProtocol(selection="ELBO: weights and noise scale by the ELBO; prior N(0, 1) fixed"),
    # compare's budget: 15,000 steps (pinned so that compare does not follow a change of fit's; JIT-compiled, as any
    # run of that length with a guide that compiles), enough for SVI's own check on every seed of the main job (chosen
    # on the built-in data: benchmarks/results/nuts_defaults.md); far fewer steps stop well below the plateau
    # (benchmarks/results/svi_defaults.md)
    compare_options={"steps": 15000},
    # autonormal and meanfield both cover the latent scales (log-normal); autonormal stays the default there
    model_defaults=for_hierarchical({"guide": "autonormal"}),
)


def fit_svi(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SVI on training tensors ``(x, y)`` with the options of :class:`SVIOptions` (validated before any work)."""
    return METHOD(model, x, y, **options)


__all__ = [
    "DEFAULT_CHECKPOINT_EVERY", "GradientVariance", "KLWeighting", "LRSchedule", "METHOD", "NonFiniteELBOError", "SVIOptions",
    "SVIRecord", "fit_svi", "gradient_variance", "run_svi",
]
