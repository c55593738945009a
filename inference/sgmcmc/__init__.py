"""Stochastic-gradient MCMC: SGLD and pSGLD (:func:`fit_sgld`) and SGHMC (:func:`fit_sghmc`) on minibatch gradients."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import FIXED_PRIOR_POTENTIAL
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning, IncompleteSamplingWarning
from bnn.inference.sgmcmc.cost import COST
from bnn.inference.sgmcmc.fit import run_sgmcmc
from bnn.inference.sgmcmc.options import Preconditioner, SGHMCOptions, SGLDOptions, StepSchedule
from bnn.inference.sgmcmc.record import SGHMCRecord, SGLDRecord

FLOORS = {"num_warmup": 1000, "num_samples": 100}
"""The least burn-in and draws a time budget leaves an SG-MCMC run."""
SGLD = Method("sgld", SGLDOptions, run_sgmcmc, refuses_hierarchical=FIXED_PRIOR_POTENTIAL, cost=COST, budget_floors=FLOORS,
              advice="raise --num-warmup and --num-samples (or --thin), or tune --step-size.")
SGHMC = Method("sghmc", SGHMCOptions, run_sgmcmc, refuses_hierarchical=FIXED_PRIOR_POTENTIAL, cost=COST, budget_floors=FLOORS,
               advice="raise --num-warmup and --num-samples (or --thin), or tune --step-size or --friction.")


def fit_sgld(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SGLD (or pSGLD, ``precondition="rmsprop"``) on ``(x, y)`` with the options of :class:`SGLDOptions`."""
    return SGLD(model, x, y, **options)


def fit_sghmc(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SGHMC on ``(x, y)`` with the options of :class:`SGHMCOptions`."""
    return SGHMC(model, x, y, **options)


__all__ = [
    "SGHMC", "SGLD", "ConvergenceWarning", "IncompleteSamplingWarning", "Preconditioner", "SGHMCOptions", "SGHMCRecord",
    "SGLDOptions", "SGLDRecord", "StepSchedule", "fit_sghmc", "fit_sgld", "run_sgmcmc",
]
