"""The MAP point estimate as a method (or, with ``objective="mle"``, maximum likelihood): one draw, the plug-in
predictive (:func:`fit_map`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import POINT_ESTIMATE
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.point_estimate.cost import COST
from bnn.inference.point_estimate.fit import run_map
from bnn.inference.point_estimate.options import MapOptions, Objective
from bnn.inference.point_estimate.record import MapRecord

METHOD = Method("map", MapOptions, run_map, MapRecord, refuses_hierarchical=POINT_ESTIMATE, cost=COST,
                point_estimate=True)


def fit_map(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """The MAP (or maximum-likelihood) point estimate on ``(x, y)`` with the options of :class:`MapOptions` (validated
    first)."""
    return METHOD(model, x, y, **options)


__all__ = ["METHOD", "MapOptions", "MapRecord", "Objective", "fit_map", "run_map"]
