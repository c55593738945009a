"""What SWAG records: each member's MAP start and how its SGD ran."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.record import FitRecord
from bnn.inference.map_search.advice import members_not_converged
from bnn.inference.swag.options import MultiSWAGOptions, SWAGOptions


@dataclass(kw_only=True)
class SWAGRecord(FitRecord):
    r"""The record of :func:`~bnn.inference.swag.fit_swag`.

    Attributes
    ----------
    options : SWAGOptions
        The options it ran with.
    map_converged, map_grad_norms : list
        Per member, whether its MAP start converged (its Newton decrement below ``map_tolerance``, or on minibatches
        its objective flat), and its gradient norm.
    map_minibatch : bool
        Whether the MAP starts were fitted on minibatches (:mod:`bnn.inference.map_search.minibatch_map`).
    noise : list of float, optional
        Per member, the MAP's noise scale of a learned Gaussian noise.
    member_method : str
        Where the members' MAP fits ran: ``"parallel"`` (worker processes) or ``"sequential"``.
    batch_size : int
        Data points per SGD step.
    sgd_steps : int
        SGD steps per member after its MAP.
    collected : int
        Iterates collected per member (one an epoch).
    curvature : list of float
        Per member, :math:`\lambda_{max}` of the negative log joint's Hessian at its MAP.
    sgd_rates : list of float
        Per member, the :math:`\eta` its SGD ran at (``swag_lr``, or set from ``curvature``).
    """

    options: SWAGOptions
    map_converged: list[bool]
    map_grad_norms: list[float]
    map_minibatch: bool = False
    noise: list[float] | None = None
    member_method: str
    batch_size: int
    sgd_steps: int
    collected: int
    curvature: list[float]
    sgd_rates: list[float]

    @property
    def converged(self) -> bool:
        """Whether every member's MAP start converged."""
        return all(self.map_converged)

    def problems(self) -> list[str]:
        stalled = [member for member, done in enumerate(self.map_converged) if not done]
        if not stalled:
            return []
        return [members_not_converged("the MAP starts of", stalled, self.map_minibatch, self.options.map_tolerance)]

    def metrics(self) -> dict[str, Any]:
        return {"members": len(self.map_converged), "map_converged": self.converged,
                "map_grad_norm": max(self.map_grad_norms), "swag_lr": max(self.sgd_rates), "batch_size": self.batch_size}


@dataclass(kw_only=True)
class MultiSWAGRecord(SWAGRecord):
    """The record of :func:`~bnn.inference.swag.fit_multiswag`."""

    options: MultiSWAGOptions
