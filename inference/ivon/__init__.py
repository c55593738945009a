"""IVON (Shen et al. 2024): a mean-field Gaussian posterior learned at the cost of Adam (:func:`fit_ivon`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import WEIGHT_DECAY_PRIOR
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.core.uci_protocol import UCIProtocol
from bnn.inference.ivon.cost import COST
from bnn.inference.ivon.fit import run_ivon
from bnn.inference.ivon.options import IVONOptions
from bnn.inference.ivon.record import IVONRecord

METHOD = Method(
    "ivon", IVONOptions, run_ivon, IVONRecord, refuses_hierarchical=WEIGHT_DECAY_PRIOR, cost=COST,
    budget_floors={"epochs": 10}, advice="raise --epochs, or lower --lr.",
    uci=UCIProtocol(selection="fixed: the defaults, prior N(0, 1), the noise fitted with the weights"),
)


def fit_ivon(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """IVON on ``(x, y)`` with the options of :class:`IVONOptions` (validated first)."""
    return METHOD(model, x, y, **options)


__all__ = ["METHOD", "IVONOptions", "IVONRecord", "fit_ivon", "run_ivon"]
