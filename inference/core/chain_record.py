"""The record of a Markov-chain method (NUTS, SG-MCMC): its convergence checks and whether it was cut short."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bnn.inference.core.record import FitRecord
from bnn.inference.diagnostics.convergence import ChainDiagnostics


@dataclass(kw_only=True)
class ChainRecord(FitRecord):
    """What every Markov-chain method records beyond its options: its convergence checks and whether it was cut short.

    Attributes
    ----------
    diagnostics : ChainDiagnostics
        R-hat (weights and predictive), ESS, divergences and the verdict.
    incomplete : bool
        The run was interrupted (Ctrl-C, SIGTERM) and holds fewer draws than asked; ``incomplete_reason`` says what.
    """

    method: ClassVar[str] = ""
    diagnostics: ChainDiagnostics
    incomplete: bool = False
    incomplete_reason: str | None = None

    @property
    def converged(self) -> bool:
        """The chains' own verdict (:attr:`ChainDiagnostics.converged`)."""
        return self.diagnostics.converged

    @property
    def interrupted(self) -> str | None:
        return self.incomplete_reason if self.incomplete else None

    def problems(self) -> list[str]:
        return [f"{self.method} was interrupted: {self.incomplete_reason}"] if self.incomplete else []

    def metrics(self) -> dict[str, Any]:
        faults = {"incomplete": True, "incomplete_reason": self.incomplete_reason} if self.incomplete else {}
        return {**vars(self.diagnostics), **faults}
