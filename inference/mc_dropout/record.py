"""What an MC dropout fit records: its training (loss history, steps done), the dropout rate and the noise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bnn.inference.core.record import FitRecord
from bnn.inference.mc_dropout.options import MCDropoutOptions


@dataclass(kw_only=True)
class MCDropoutRecord(FitRecord):
    """The record of :func:`~bnn.inference.mc_dropout.fit_mc_dropout`.

    Attributes
    ----------
    options : MCDropoutOptions
        The options it ran with.
    batch_size : int
        Examples per step (the training set's size for full-batch steps).
    steps_done : int
        The steps taken (``options.training_steps(rows)`` unless interrupted).
    loss_history : list of float
        The objective of every step: the negative expected log joint per example (see
        :mod:`bnn.inference.mc_dropout.fit`), up to a constant.
    noise : float, optional
        The noise scale a learned Gaussian noise was fitted to.
    incomplete : bool
        Training was interrupted (Ctrl-C, SIGTERM) before its last step; ``incomplete_reason`` says when.
    """

    options: MCDropoutOptions
    batch_size: int
    steps_done: int
    loss_history: list[float]
    noise: float | None = None
    incomplete: bool = False
    incomplete_reason: str | None = None

    def problems(self) -> list[str]:
        return [f"MC dropout was interrupted: {self.incomplete_reason}"] if self.incomplete else []

    def metrics(self) -> dict[str, Any]:
        faults = {"incomplete": True, "incomplete_reason": self.incomplete_reason} if self.incomplete else {}
        return {"final_loss": self.loss_history[-1], "dropout_rate": self.options.dropout_rate,
                **({} if self.noise is None else {"noise": self.noise}), **faults}
