"""What SWAG records: each member's MAP start and how its SGD ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bnn.inference.core.record import FitRecord
from bnn.inference.map_search.advice import members_not_converged
from bnn.inference.swag.effective_parameters import EXCESS_Z, too_wide
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
    effective_parameters, effective_parameters_se : list of float
        Per member, :math:`\hat p_D` of its Gaussian on the training rows and its standard error
        (:mod:`bnn.inference.swag.effective_parameters`; empty in a record saved before the check).
    latent_values : int
        :math:`D`, the model's latent values (weights and a learned noise), the bound on :math:`p_D`.
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
    effective_parameters: list[float] = field(default_factory=list)
    effective_parameters_se: list[float] = field(default_factory=list)
    latent_values: int = 0

    @property
    def too_wide(self) -> list[int]:
        """The members whose Gaussian is wider than a posterior Gaussian of the model can be."""
        return too_wide(self.effective_parameters, self.effective_parameters_se, self.latent_values)

    @property
    def converged(self) -> bool:
        """Whether every member's MAP start converged and no member's Gaussian is wider than a posterior Gaussian of
        the model (its effective number of parameters above the model's latent values)."""
        return all(self.map_converged) and not self.too_wide

    def problems(self) -> list[str]:
        stalled = [member for member, done in enumerate(self.map_converged) if not done]
        said = [members_not_converged("the MAP starts of", stalled, self.map_minibatch, self.options.map_tolerance)
                ] if stalled else []
        wide = self.too_wide
        if wide:
            p_d = ", ".join(f"{self.effective_parameters[m]:.0f} +- {self.effective_parameters_se[m]:.0f}" for m in wide)
            fix = (f"lower swag_lr (now {self.options.swag_lr:g})" if self.options.swag_lr is not None else
                   f"lower step_share (now {self.options.step_share:g})")
            said.append(f"SWAG's Gaussian of members {wide} is wider than any posterior Gaussian of the model: its "
                        f"effective number of parameters on the training rows, p_D = {p_d}, exceeds the model's "
                        f"{self.latent_values} latent values by more than {EXCESS_Z:g} standard errors (its draws "
                        f"predict the training data worse than its mean by more than any posterior's would); {fix}")
        return said

    def metrics(self) -> dict[str, Any]:
        return {"members": len(self.map_converged), "map_converged": self.converged,
                "map_grad_norm": max(self.map_grad_norms), "swag_lr": max(self.sgd_rates), "batch_size": self.batch_size,
                **({"effective_parameters": max(self.effective_parameters)} if self.effective_parameters else {})}


@dataclass(kw_only=True)
class MultiSWAGRecord(SWAGRecord):
    """The record of :func:`~bnn.inference.swag.fit_multiswag`."""

    options: MultiSWAGOptions
