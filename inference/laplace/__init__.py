"""The Laplace approximation: a Gaussian at the MAP with the curvature as precision (:func:`fit_laplace`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import PER_WEIGHT_SCALES
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.laplace.cost import COST
from bnn.inference.laplace.curvature import HessianType, Structure
from bnn.inference.laplace.fit import run_laplace
from bnn.inference.laplace.linearized import Linearization
from bnn.inference.laplace.options import LaplaceOptions
from bnn.inference.laplace.precision import posterior_precision
from bnn.inference.laplace.record import LaplaceRecord

METHOD = Method(
    "laplace", LaplaceOptions, run_laplace, LaplaceRecord, cost=COST, refuses_hierarchical=PER_WEIGHT_SCALES,
    uci=UCIProtocol(options={"tune_prior_precision": True},
                    selection="evidence: prior precision and noise scale by the Laplace marginal likelihood (the MAP "
                              "refitted at each)"),
)


def fit_laplace(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """The Laplace approximation on ``(x, y)`` with the options of :class:`LaplaceOptions` (validated first)."""
    return METHOD(model, x, y, **options)


__all__ = [
    "METHOD", "HessianType", "LaplaceOptions", "LaplaceRecord", "Linearization", "Structure", "fit_laplace",
    "posterior_precision", "run_laplace",
]
