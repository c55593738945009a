"""SWAG (:func:`fit_swag`) and MultiSWAG (:func:`fit_multiswag`): Gaussians fitted to SGD's iterates around MAP starts."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import POINT_ESTIMATE
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.swag.cost import COST
from bnn.inference.swag.fit import run_swag
from bnn.inference.swag.moments import SWAGMoments
from bnn.inference.swag.options import MultiSWAGOptions, SWAGOptions
from bnn.inference.swag.record import MultiSWAGRecord, SWAGRecord

ADVICE = "raise --map-max-iter or --map-steps for the MAP starts."
SWAG = Method("swag", SWAGOptions, run_swag, SWAGRecord, refuses_hierarchical=POINT_ESTIMATE, cost=COST, advice=ADVICE)
MULTISWAG = Method("multiswag", MultiSWAGOptions, run_swag, MultiSWAGRecord, refuses_hierarchical=POINT_ESTIMATE, cost=COST,
                   advice=ADVICE)


def fit_swag(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SWAG on ``(x, y)`` with the options of :class:`SWAGOptions`."""
    return SWAG(model, x, y, **options)


def fit_multiswag(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """MultiSWAG on ``(x, y)`` with the options of :class:`MultiSWAGOptions`."""
    return MULTISWAG(model, x, y, **options)


__all__ = ["MULTISWAG", "SWAG", "MultiSWAGOptions", "MultiSWAGRecord", "SWAGMoments", "SWAGOptions", "SWAGRecord",
           "fit_multiswag", "fit_swag", "run_swag"]
