"""What an SG-MCMC run records: its options, its chains and their convergence checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.chain_record import ChainRecord
from bnn.inference.sgmcmc.options import CSGLDOptions, SGHMCOptions, SGLDOptions, SGMCMCOptions


@dataclass(kw_only=True)
class SGMCMCRecord(ChainRecord):
    r"""The record of an SG-MCMC run (one registered subclass per method).

    Attributes
    ----------
    options : SGLDOptions, SGHMCOptions or CSGLDOptions
        The options it ran with.
    batch_size : int
        Data points per gradient (the data size for full batches).
    step_sizes : list of float
        Each chain's first step size :math:`\epsilon_0` (the given one, or ``step_share`` over its curvature).
    final_step_size : list of float
        Each chain's step size at the last step (the first one for a constant schedule, nearly zero for a cyclical
        one).
    curvature : list of float, optional
        Each chain's stiffest curvature :math:`\lambda_{max}` at its start, where it set the step size.
    map_converged : list of bool, optional
        Whether each chain's MAP start met its tolerance (``init="map"``); a start short of it is only a start.
    gradient_evaluations : int
        Minibatch gradients over all chains (one per chain and step, burn-in included).
    diagnostics : ChainDiagnostics
        R-hat (weights and predictive), ESS and the verdict; ``divergences`` is always 0 (SG-MCMC has no
        accept step to diverge in; a chain that overflows stops the run with an error).
    incomplete : bool
        The run was interrupted (Ctrl-C, SIGTERM) and holds fewer draws than asked; ``incomplete_reason`` says what.
    """

    options: SGMCMCOptions
    batch_size: int
    step_sizes: list[float]
    final_step_size: list[float]
    gradient_evaluations: int
    curvature: list[float] | None = None
    map_converged: list[bool] | None = None

    def metrics(self) -> dict[str, Any]:
        """Adds the largest first step size (``step_size``) and the batch size."""
        return {**super().metrics(), "step_size": max(self.step_sizes), "batch_size": self.batch_size}


@dataclass(kw_only=True)
class SGLDRecord(SGMCMCRecord):
    """The record of :func:`~bnn.inference.sgmcmc.fit_sgld`."""

    options: SGLDOptions


@dataclass(kw_only=True)
class SGHMCRecord(SGMCMCRecord):
    """The record of :func:`~bnn.inference.sgmcmc.fit_sghmc`."""

    options: SGHMCOptions


@dataclass(kw_only=True)
class CSGLDRecord(SGMCMCRecord):
    """The record of :func:`~bnn.inference.sgmcmc.fit_csgld` (cSGLD or cSGHMC: ``options.dynamics``)."""

    options: CSGLDOptions
