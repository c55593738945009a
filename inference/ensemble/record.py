"""What a deep ensemble records: its members (seeds, times, MAP convergence) and what stopped any of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.record import FitRecord
from bnn.inference.ensemble.options import EnsembleOptions
from bnn.inference.map_search.advice import members_not_converged


@dataclass(kw_only=True)
class EnsembleRecord(FitRecord):
    """The record of :func:`~bnn.inference.ensemble.fit_ensemble`.

    Attributes
    ----------
    options : EnsembleOptions
        The options it ran with.
    member_method : str
        ``"parallel"`` (processes) or ``"sequential"``, as the members actually ran.
    member_seeds : list of int
        The seed of every member asked for.
    members_kept : list of int
        The members whose MAP weights the posterior holds, one draw each.
    member_seconds, map_lbfgs_iterations, map_grad_norms, map_converged : list
        Per member kept: its wall time, polish iterations, gradient norm at its MAP and whether its MAP fit converged
        (its Newton decrement below ``map_tolerance``, or on minibatches its objective flat).
    map_minibatch : bool
        Whether the members' MAPs were fitted on minibatches (:mod:`bnn.inference.map_search.minibatch_map`).
    noise : list of float, optional
        Per member kept, the noise scale of a learned Gaussian noise (:mod:`bnn.inference.map_search.map_estimate`).
    failed_members : dict of str to str, optional
        The error of every member that failed.
    incomplete : bool
        The run was interrupted (Ctrl-C, SIGTERM) and holds fewer members than asked; ``incomplete_reason`` says what.
    """

    options: EnsembleOptions
    member_method: str
    member_seeds: list[int]
    members_kept: list[int]
    member_seconds: list[float]
    map_lbfgs_iterations: list[int]
    map_grad_norms: list[float]
    map_converged: list[bool]
    map_minibatch: bool = False
    noise: list[float] | None = None
    failed_members: dict[str, str] | None = None
    incomplete: bool = False
    incomplete_reason: str | None = None

    @property
    def converged(self) -> bool:
        """Whether every member's MAP fit converged."""
        return all(self.map_converged)

    def problems(self) -> list[str]:
        found = []
        stalled = [member for member, done in zip(self.members_kept, self.map_converged) if not done]
        if stalled:
            found.append(members_not_converged("the MAP fits of", stalled, self.map_minibatch, self.options.map_tolerance))
        if self.failed_members:
            found.append(f"members failed: {self.failed_members}")
        if self.incomplete:
            found.append(f"the ensemble was interrupted: {self.incomplete_reason}")
        return found

    @property
    def interrupted(self) -> str | None:
        return self.incomplete_reason if self.incomplete else None

    def metrics(self) -> dict[str, Any]:
        entries = {"members": len(self.members_kept), "map_converged": self.converged, "map_grad_norm": max(self.map_grad_norms)}
        if self.failed_members:
            entries["failed_members"] = self.failed_members
        if self.incomplete:
            entries.update(incomplete=True, incomplete_reason=self.incomplete_reason)
        return entries
