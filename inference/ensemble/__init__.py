"""Deep ensembles: independent MAP fits, one draw each, fitted in parallel processes (:func:`fit_ensemble`)."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import POINT_ESTIMATE
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.ensemble.cost import COST
from bnn.inference.ensemble.fit import IncompleteEnsembleWarning, run_ensemble
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.ensemble.record import EnsembleRecord
from bnn.inference.map_search.map_starts import MemberMethod

METHOD = Method("ensemble", EnsembleOptions, run_ensemble, EnsembleRecord, refuses_hierarchical=POINT_ESTIMATE, cost=COST)


def fit_ensemble(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """A deep ensemble on ``(x, y)`` with the options of :class:`EnsembleOptions` (validated first)."""
    return METHOD(model, x, y, **options)


__all__ = ["METHOD", "EnsembleOptions", "EnsembleRecord", "IncompleteEnsembleWarning", "MemberMethod", "fit_ensemble",
           "run_ensemble"]
