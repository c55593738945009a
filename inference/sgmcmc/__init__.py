"""Stochastic-gradient MCMC: SGLD and pSGLD (:func:`fit_sgld`), SGHMC (:func:`fit_sghmc`) and their cyclical forms
cSGLD and cSGHMC (:func:`fit_csgld`) on minibatch gradients."""

from __future__ import annotations

from typing import Any

import torch
from bnn.inference.core.hierarchical_refusal import FIXED_PRIOR_POTENTIAL
from bnn.inference.core.method import Method
from bnn.inference.core.posterior import Posterior
from bnn.inference.diagnostics.convergence import ConvergenceWarning, IncompleteSamplingWarning
from bnn.inference.sgmcmc.cost import COST
from bnn.inference.sgmcmc.fit import run_sgmcmc
from bnn.inference.sgmcmc.options import (
    BurnInOptions,
    CSGLDOptions,
    Dynamics,
    Preconditioner,
    SGHMCOptions,
    SGLDOptions,
    StepSchedule,
)
from bnn.inference.sgmcmc.record import CSGLDRecord, SGHMCRecord, SGLDRecord

FLOORS = {"num_warmup": 1000, "num_samples": 100}
"""The least burn-in and draws a time budget leaves an SG-MCMC run."""
SGLD = Method("sgld", SGLDOptions, run_sgmcmc, SGLDRecord, refuses_hierarchical=FIXED_PRIOR_POTENTIAL, cost=COST,
              budget_floors=FLOORS, advice="raise --num-warmup and --num-samples (or --thin), or tune --step-size.")
SGHMC = Method("sghmc", SGHMCOptions, run_sgmcmc, SGHMCRecord, refuses_hierarchical=FIXED_PRIOR_POTENTIAL, cost=COST,
               budget_floors=FLOORS,
               advice="raise --num-warmup and --num-samples (or --thin), or tune --step-size or --friction.")

CSGLD = Method("csgld", CSGLDOptions, run_sgmcmc, CSGLDRecord, refuses_hierarchical=FIXED_PRIOR_POTENTIAL, cost=COST,
               budget_floors={"cycle_length": 500},
               advice="raise --num-cycles or --cycle-length, run more chains (--num-chains), or tune --step-size.")


def fit_sgld(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SGLD (or pSGLD, ``precondition="rmsprop"``) on ``(x, y)`` with the options of :class:`SGLDOptions`."""
    return SGLD(model, x, y, **options)


def fit_sghmc(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """SGHMC on ``(x, y)`` with the options of :class:`SGHMCOptions`."""
    return SGHMC(model, x, y, **options)


def fit_csgld(model, x: torch.Tensor, y: torch.Tensor, **options: Any) -> Posterior:
    """cSGLD (or cSGHMC, ``dynamics="hamiltonian"``) on ``(x, y)`` with the options of :class:`CSGLDOptions`."""
    return CSGLD(model, x, y, **options)


__all__ = [
    "CSGLD", "SGHMC", "SGLD", "BurnInOptions", "CSGLDOptions", "CSGLDRecord", "ConvergenceWarning", "Dynamics",
    "IncompleteSamplingWarning", "Preconditioner", "SGHMCOptions", "SGHMCRecord", "SGLDOptions", "SGLDRecord",
    "StepSchedule", "fit_csgld", "fit_sghmc", "fit_sgld", "run_sgmcmc",
]
